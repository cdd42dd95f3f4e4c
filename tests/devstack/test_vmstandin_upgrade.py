"""A guest's major upgrade at boot (the guest program, ``guest.boot.apply_upgrade``, as
the stand-in runs it) after its server was not shut down cleanly: a VM that lost
power, or one KubeVirt killed at the end of its grace period because the shutdown
checkpoint of a loaded server took longer. pg_upgrade refuses such a cluster ("The
source cluster was not shut down cleanly"); the boot recovers it first, with the old
major's binaries, and the upgrade keeps every committed row."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr

from dbi import bootstrap, scram, tls
from devstack import postgresql
from devstack.vmstandin.guest import Guest
from devstack.vmstandin.kubevirt import Size
from guest import upgrade as guest_upgrade
from tests.guests import wait_ready

ADDRESS = f"127.67.{secrets.randbelow(200) + 1}.{secrets.randbelow(200) + 1}"
SIZE = Size(1, 1, 1, 1, 512 << 20, 512 << 20)
ROWS = 5000


@pytest.fixture
def guest(tmp_path: Path) -> Iterator[tuple[Guest, bootstrap.Bootstrap, str]]:
    """A guest of PostgreSQL 17, its bootstrap document and its admin's password."""
    password = secrets.token_urlsafe(24)
    ca = tls.new_ca("team-a")
    pair = tls.issue(ca, tls.service_names("team-a", "db"))
    doc = bootstrap.Bootstrap(
        admin_verifier=scram.verifier(password),
        server_cert=pair.cert_pem,
        server_key=SecretStr(pair.key_pem),
    )
    guest = Guest(
        disk=tmp_path / "disk",
        address=ADDRESS,
        log_path=tmp_path / "postgres.log",
        version=postgresql.BY_MAJOR[17],
    )
    guest.prepare(doc, SIZE)
    try:
        yield guest, doc, password
    finally:
        guest.stop()


def _boot(guest: Guest, doc: bootstrap.Bootstrap, password: str) -> psycopg.Connection:
    """Boot as the stand-in does (the guest program, then the server); connect as dbi."""
    guest.prepare(doc, SIZE)
    guest.boot(SIZE)
    wait_ready(guest, f"PostgreSQL {guest.version} accepting connections")
    return psycopg.connect(
        host=guest.address,
        port=5432,
        sslmode="require",
        user=doc.admin_user,
        password=password,
        dbname="postgres",
    )


def _state(guest: Guest, major: int) -> str:
    """What pg_controldata says of the data directory's state."""
    binaries = postgresql.install(postgresql.BY_MAJOR[major])
    said = subprocess.run(
        [str(binaries / "pg_controldata"), str(guest.pgdata)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return next(line for line in said.splitlines() if line.startswith("Database cluster state"))


def test_an_upgrade_after_a_crash_recovers_the_old_cluster_and_keeps_every_row(
    guest: tuple[Guest, bootstrap.Bootstrap, str],
) -> None:
    vm, doc, password = guest
    with _boot(vm, doc, password) as conn:
        conn.execute("CREATE TABLE orders AS SELECT g AS id FROM generate_series(1, %s) g", (ROWS,))
    vm.crash()  # the VM loses power: no shutdown checkpoint
    vm.forget()
    assert "shut down" not in _state(vm, 17)

    vm.use(postgresql.BY_MAJOR[18])  # the new root disk's image
    upgrade = bootstrap.Upgrade(from_major=17, to_major=18, token="upgrade-1")  # noqa: S106
    doc = doc.model_copy(update={"upgrade": upgrade})
    said = vm.prepare(doc, SIZE)

    assert said["upgrade"] == "upgraded"
    report = guest_upgrade.report_of(vm.pgdata)
    assert (report["ok"], report["phase"]) == (True, "upgraded"), report
    assert vm.data_major() == 18
    with _boot(vm, doc, password) as conn:
        row = conn.execute("SELECT count(*), max(id) FROM orders").fetchone()
        version = conn.execute("SHOW server_version_num").fetchone()
    assert row == (ROWS, ROWS)
    assert version is not None and version[0].startswith("18")
