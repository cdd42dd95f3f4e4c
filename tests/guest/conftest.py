"""What the guest's tests on real PostgreSQL binaries share."""

from __future__ import annotations

import pwd

import pytest

from devstack import postgresql
from guest import boot
from guest import disk as disk_

MAJOR = 17
SIZE = boot.Size(cpus=2, memory_bytes=1 << 30)


@pytest.fixture(scope="module")
def host() -> disk_.Host:
    """PostgreSQL 17's binaries, run as ``nobody`` (PostgreSQL refuses root)."""
    nobody = pwd.getpwnam("nobody")
    return disk_.Host(
        binaries={MAJOR: postgresql.install(postgresql.BY_MAJOR[MAJOR])},
        user=(nobody.pw_uid, nobody.pw_gid),
        login="nobody",
    )
