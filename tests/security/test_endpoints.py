"""A tenant's backup endpoint cannot point the worker at what only dbi's namespace
reaches: an address given literally stalls the instance, naming the field; a name that
resolves to such an address fails the backup before any packet goes there; and nothing
a store answers reaches the DBBackup's status."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest

from activities.infra.endpoints import FIELD
from dbi import names
from dbi.backups import Reason
from tests.security.tenancy import Tenancy, instance

pytestmark = pytest.mark.stack


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    """A TCP socket on every local address: the internal service an attacker aims at."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))  # noqa: S104 (the host's own addresses, for the test)
    sock.listen()
    sock.setblocking(False)
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


def reached(sock: socket.socket) -> bool:
    """Whether anything connected to the listener (without waiting)."""
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def backup_to(tenancy: Tenancy, name: str, endpoint: str) -> None:
    """Mallory's instance ``name`` backing up to her "bucket" at ``endpoint``."""
    ns = tenancy.mallory
    keys = "--from-literal=AWS_ACCESS_KEY_ID=k", "--from-literal=AWS_SECRET_ACCESS_KEY=s"
    tenancy.tenant("create", "secret", "generic", f"{name}-s3", "-n", ns, *keys)
    target = {"s3": {"bucket": "loot", "endpoint": endpoint, "credentialsSecret": f"{name}-s3"}}
    backup = {"schedule": "0 3 1 1 *", "target": target}
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=instance(name, backup=backup))


def test_an_endpoint_written_as_an_internal_address_stalls_the_instance(
    tenancy: Tenancy, listener: tuple[socket.socket, int]
) -> None:
    """`http://127.0.0.1:<port>`: the backup step stalls with NoBackupStore, naming the
    field; the worker never connects there."""
    sock, port = listener
    backup_to(tenancy, "literal", f"http://127.0.0.1:{port}")
    stalled = tenancy.stalled(tenancy.mallory, "literal")
    assert stalled["reason"] == "NoBackupStore" and FIELD in stalled["message"], stalled
    assert not reached(sock)


def test_a_name_resolving_to_an_internal_address_fails_the_backup_unsent(
    tenancy: Tenancy, listener: tuple[socket.socket, int]
) -> None:
    """The host's own name (it resolves to a local address): the instance is Ready, but
    the backup Mallory asks for fails with BackupStoreFailed, saying the address is not
    one dbi reaches, and the worker never connects there."""
    sock, port = listener
    name = socket.gethostname()
    backup_to(tenancy, "named", f"http://{name}:{port}")
    ns = tenancy.mallory
    tenancy.ready(ns, "named")
    ask = f"{names.BACKUP_REQUESTED_AT}=steal"
    tenancy.tenant("annotate", "dbinstance", "named", "-n", ns, ask)

    def failed() -> dict[str, str] | None:
        for backup in tenancy.backups(ns).values():
            status = backup.get("status") or {}
            if backup["spec"]["instance"] == "named" and status.get("phase") == "Failed":
                return dict(status)
        return None

    status = tenancy.until(failed, what="the backup Failed")
    assert status["reason"] == Reason.STORE_FAILED and FIELD in status["message"], status
    assert not reached(sock)
    events = json.loads(tenancy.tenant("get", "events", "-n", ns, "-o", "json").stdout)
    warned = [e["message"] for e in events["items"] if e["reason"] == Reason.FAILED]
    assert warned and all(FIELD in m for m in warned if "named" in m), warned
