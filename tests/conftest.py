import atexit
import os
import shutil
import tempfile

import pytest

from devstack import postgresql

# The credentials Secret's uri names the Service's ClusterIP too (hostaddr), as `./dev
# up` has it: this host has no cluster DNS for the Secret's host. Every worker the tests
# start, in process or as a process, reads it.
os.environ.setdefault("DBI_CONNECT_HOSTADDR", "1")

# Backups go to a directory of this session's, removed when it ends; pg_basebackup is the
# local stack's PostgreSQL 18 build (devstack.postgresql installs it with the stack).
_backups = tempfile.mkdtemp(prefix="dbi-backups-")
atexit.register(shutil.rmtree, _backups, ignore_errors=True)
os.environ.setdefault("DBI_BACKUP_STORE", f"file://{_backups}")
os.environ.setdefault("DBI_PG_BIN_DIR", str(postgresql.bin_dir()))
# Tenants' buckets in the tests are the local S3 server's, on loopback; the hostile-tenant
# suite's worker allows no such network (tests/security/tenancy.py).
os.environ.setdefault("DBI_BACKUP_ALLOWED_NETWORKS", "127.0.0.0/8")

pytest_plugins = [
    "tests.stack",
    "tests.orchestrator",
    "tests.deployment",
    "tests.journeys.product",
    "tests.security.tenancy",
    "tests.guests",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The real-VM journey first: its boots under software emulation take minutes, and
    begun first they overlap the rest of the suite instead of trailing it."""
    items.sort(key=lambda item: "test_real_vm" not in item.nodeid)
