"""A replica's boot on real PostgreSQL binaries, outside any VM: the first boot clones a
running primary over verified TLS through its slot and the member streams; a clone
that fails leaves no data directory and says why; the password is in the passfile only;
a document without ``replica`` never promotes a standby at boot."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr

from dbi import bootstrap, scram, tls
from devstack.tools import free_port
from devstack.vmstandin.guest import make_traversable
from guest import boot, files, replica
from guest import disk as disk_
from guest.document import parse
from tests.guest.conftest import MAJOR, SIZE

ADMIN_PASSWORD = "admin-password"  # noqa: S105
REPLICATION_PASSWORD = "repl:pass\\word"  # noqa: S105 (a colon and a backslash, escaped)
CA = tls.new_ca("team-a")
PAIR = tls.issue(CA, tls.service_names("team-a", "db"))


def _document(**fields: object) -> bootstrap.Bootstrap:
    return bootstrap.Bootstrap(
        admin_verifier=scram.verifier(ADMIN_PASSWORD),
        server_cert=PAIR.cert_pem,
        server_key=SecretStr(PAIR.key_pem),
        **fields,  # type: ignore[arg-type]
    )


def _replica(port: int, password: str = REPLICATION_PASSWORD) -> bootstrap.Replica:
    return bootstrap.Replica(
        host="db.team-a.svc",
        hostaddr="127.0.0.1",
        port=port,
        user="dbi_replication",
        password=SecretStr(password),
        ca=CA.cert_pem,
        slot="dbi_db_2",
        application_name="db-2",
    )


def _prepare(doc: bootstrap.Bootstrap, disk: Path, host: disk_.Host) -> boot.Booted:
    raw = parse(json.loads(bootstrap.to_document(doc)))
    return boot.prepare(raw, disk, host, image_major=MAJOR, size=SIZE)


class _Server:
    def __init__(self, disk: Path, host: disk_.Host, port: int) -> None:
        self.disk, self.host, self.port = disk, host, port

    def pg_ctl(self, *args: str) -> None:
        ran = self.host.run(
            [self.host.tool(MAJOR, "pg_ctl"), "-D", str(disk_.pgdata(self.disk)), *args]
        )
        assert ran.returncode == 0, ran.stdout + ran.stderr

    def start(self) -> None:
        options = f"-p {self.port} -k {self.disk} -c listen_addresses=127.0.0.1"
        self.pg_ctl("-o", options, "-l", str(self.disk / "server.log"), "-w", "start")

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user="dbi_admin",
            password=ADMIN_PASSWORD,
            dbname="postgres",
            sslmode="require",
            autocommit=True,
        )


@pytest.fixture
def servers(tmp_path: Path, host: disk_.Host) -> Iterator[list[_Server]]:
    make_traversable(tmp_path)
    started: list[_Server] = []
    yield started
    for server in started:
        server.host.run(
            [
                server.host.tool(MAJOR, "pg_ctl"),
                "-D",
                str(disk_.pgdata(server.disk)),
                "-m",
                "immediate",
                "stop",
            ]
        )


def _primary(tmp_path: Path, host: disk_.Host, servers: list[_Server]) -> _Server:
    primary = _Server(tmp_path / "primary", host, free_port())
    _prepare(_document(), primary.disk, host)
    primary.start()
    servers.append(primary)
    verifier = scram.verifier(REPLICATION_PASSWORD)
    with primary.connect() as conn:
        conn.execute(f"CREATE ROLE dbi_replication LOGIN REPLICATION PASSWORD '{verifier}'")
        conn.execute("SELECT pg_create_physical_replication_slot('dbi_db_2')")
        conn.execute("CREATE TABLE t (n int)")
        conn.execute("INSERT INTO t VALUES (1)")
    return primary


def test_a_replica_clones_the_primary_and_streams(
    tmp_path: Path,
    host: disk_.Host,
    servers: list[_Server],
) -> None:
    primary = _primary(tmp_path, host, servers)
    member = _Server(tmp_path / "member", host, free_port())
    booted = _prepare(_document(replica=_replica(primary.port)), member.disk, host)
    assert booted.initialized
    data = booted.pgdata
    assert (data / "standby.signal").exists()
    conf = (data / files.REPLICA_CONF).read_text()
    assert "sslmode=''verify-full''" in conf and "primary_slot_name = 'dbi_db_2'" in conf
    assert "repl:pass" not in conf and "password" not in conf  # in the passfile only
    assert (member.disk / files.REPLICA_PASSFILE).stat().st_mode & 0o777 == 0o600
    member.start()
    servers.append(member)
    with primary.connect() as conn:
        conn.execute("INSERT INTO t VALUES (2)")
    with member.connect() as conn:
        assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        deadline = time.monotonic() + 30
        while conn.execute("SELECT count(*) FROM t").fetchone() != (2,):
            assert time.monotonic() < deadline, "the replica never received the second row"
            time.sleep(0.2)
    with primary.connect() as conn:
        streaming = conn.execute(
            "SELECT application_name, state, ssl FROM pg_stat_replication"
            " JOIN pg_stat_ssl USING (pid)"
        ).fetchall()
    assert streaming == [("db-2", "streaming", True)]
    # A later boot keeps the data and still streams; without replica, it stays a standby.
    member.pg_ctl("-m", "fast", "stop")
    again = _prepare(_document(replica=_replica(primary.port)), member.disk, host)
    assert not again.initialized
    _prepare(_document(), member.disk, host)
    assert (data / "standby.signal").exists()
    assert (data / files.REPLICA_CONF).read_text() == ""


def test_a_clone_that_fails_leaves_no_data_and_says_why(
    tmp_path: Path,
    host: disk_.Host,
    servers: list[_Server],
) -> None:
    primary = _primary(tmp_path, host, servers)
    disk = tmp_path / "member"
    doc = _document(replica=_replica(primary.port, password="wrong"))  # noqa: S106
    with pytest.raises(RuntimeError, match=r"pg_basebackup from db\.team-a\.svc") as raised:
        _prepare(doc, disk, host)
    assert "wrong" not in str(raised.value)
    assert not (disk / files.DATA).exists() and not (disk / replica.CLONING).exists()
