"""A guest's PostgreSQL booted as the VM stand-in boots one (the guest program, then the
server), outside any cluster: TLS with a certificate of a namespace CA, SCRAM, dbi's
admin role; for tests of what talks to one (sessions, pg_basebackup). ``booted`` is a
module-scoped fixture (a plugin of tests/conftest.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from pydantic import SecretStr

from activities.infra import postgres, trust
from dbi import bootstrap, names, scram, tls
from devstack.vmstandin.guest import Guest
from devstack.vmstandin.kubevirt import Size
from tests.polling import eventually


@dataclass
class Booted:
    server: postgres.Server
    password: str = field(repr=False)
    guest: Guest | None = None


def wait_ready(guest: Guest, what: str) -> None:
    """Wait until ``guest`` accepts connections; if it does not, fail with what its
    PostgreSQL logged since it was booted (why it did not come up)."""
    try:
        eventually(guest.ready, what=what)
    except AssertionError as e:
        lines = guest.log_since_boot().decode(errors="replace").splitlines()
        raise AssertionError("\n".join([str(e), "its log since boot:", *lines[-30:]])) from None


@pytest.fixture(scope="module")
def booted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Booted]:
    """A guest's PostgreSQL with a certificate for ``db`` in ``team-a`` and dbi's admin,
    on an address of its own."""
    address = f"127.66.{secrets.randbelow(200) + 1}.{secrets.randbelow(200) + 1}"
    tmp = tmp_path_factory.mktemp("guest")
    ca = tls.new_ca("team-a")
    pair = tls.issue(ca, tls.service_names("team-a", "db"))
    password = secrets.token_urlsafe(24)
    doc = bootstrap.Bootstrap(
        admin_verifier=scram.verifier(password),
        server_cert=pair.cert_pem,
        server_key=SecretStr(pair.key_pem),
    )
    guest = Guest(disk=tmp / "disk", address=address, log_path=tmp / "postgres.log")
    size = Size(1, 1, 1, 1, 512 << 20, 512 << 20)
    guest.prepare(doc, size)
    guest.boot(size)
    try:
        wait_ready(guest, "the guest's PostgreSQL accepting connections")
        server = postgres.Server(
            address, names.service_host("team-a", "db"), trust.trust_file(ca.cert_pem)
        )
        yield Booted(server, password, guest)
    finally:
        guest.stop()
