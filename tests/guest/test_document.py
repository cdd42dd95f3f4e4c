"""The guest reads every version of the bootstrap document the orchestrator writes, and
refuses one it cannot act on with the field named (plain data)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import SecretStr

from dbi import bootstrap, scram, tls
from guest.document import VERSION, Invalid, parse

VERIFIER = scram.verifier("a-password-of-the-admin")


REPLICA = {
    "host": "db.team-a.svc",
    "user": "dbi_replication",
    "password": "s3cret-value",
    "ca": "-----BEGIN CERTIFICATE-----",
    "slot": "dbi_db_2",
    "application_name": "db-2",
}


def test_a_replica_document_is_version_8_and_reads_back_without_showing_the_password() -> None:
    replica = bootstrap.Replica.model_validate({**REPLICA, "hostaddr": "10.0.0.1"})
    raw = written(replica=replica)
    assert raw["version"] == VERSION == 8 and raw["replica"]["password"] == "s3cret-value"  # noqa: S105
    doc = parse(raw)
    assert doc.replica is not None and doc.replica.password == "s3cret-value"  # noqa: S105
    assert (doc.replica.hostaddr, doc.replica.slot) == ("10.0.0.1", "dbi_db_2")
    assert "s3cret" not in repr(doc) and "s3cret" not in repr(replica)


def written(**fields: Any) -> dict[str, Any]:
    """A document as the orchestrator writes it today (``dbi.bootstrap.to_document``)."""
    doc = bootstrap.Bootstrap(admin_verifier=VERIFIER, **fields)
    return dict(json.loads(bootstrap.to_document(doc)))


def test_the_document_the_orchestrator_writes_today_reads_back_whole() -> None:
    ca = tls.new_ca("team-a")
    pair = tls.issue(ca, tls.service_names("team-a", "db"))
    raw = written(
        reset="token-1",
        memory_bytes=1 << 30,
        server_cert=pair.cert_pem,
        server_key=SecretStr(pair.key_pem),
        restore=bootstrap.Restore(
            backup="db-1",
            base_url="file:///b",
            wal_url="file:///w",
            archive_url="file:///a.json",
            target_lsn="0/3000060",
        ),
        upgrade=bootstrap.Upgrade(from_major=17, to_major=18, token="up-1"),  # noqa: S106
    )
    doc = parse(raw)
    assert raw["version"] == doc.version == 7
    assert doc.restore is not None
    assert (doc.restore.archive_url, doc.restore.target_lsn) == ("file:///a.json", "0/3000060")
    assert (doc.admin_verifier, doc.reset, doc.memory_bytes) == (VERIFIER, "token-1", 1 << 30)
    assert (doc.server_cert, doc.server_key) == (pair.cert_pem, pair.key_pem)
    assert doc.restore is not None and doc.restore.base_url == "file:///b"
    assert doc.upgrade is not None and (doc.upgrade.from_major, doc.upgrade.to_major) == (17, 18)
    shown = repr(doc)
    assert pair.key_pem.splitlines()[1] not in shown and VERIFIER not in shown
    assert "file:///b" not in shown  # a presigned URL grants a read of the backup


def test_only_a_point_in_time_restore_needs_a_guest_that_reads_version_6_or_7() -> None:
    """A guest of an older image refuses a version it does not read: a point-in-time
    restore is never carried out as a restore of the backup alone (nor one to an LSN as
    a replay of all the WAL); every other document stays at version 5, which those
    guests boot."""
    whole = bootstrap.Restore(backup="db-1", base_url="file:///b", wal_url="file:///w")
    assert written()["version"] == 5
    assert written(restore=whole)["version"] == 5
    replay = whole.model_copy(update={"archive_url": "file:///a"})
    assert written(restore=replay)["version"] == 6
    at_time = replay.model_copy(update={"target_time": "2026-12-07T10:00:00Z"})
    assert written(restore=at_time)["version"] == 6
    assert written(restore=replay.model_copy(update={"target_lsn": "0/3000060"}))["version"] == 7


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"version": 1, "admin_password": "pw"}, id="v1-password"),
        pytest.param({"version": 2, "admin_verifier": VERIFIER}, id="v2-verifier"),
        pytest.param(
            {"version": 3, "admin_verifier": VERIFIER, "server_cert": "c", "server_key": "k"},
            id="v3-tls",
        ),
        pytest.param({"admin_password": "pw"}, id="no-version-is-1"),
    ],
)
def test_an_older_version_reads_as_it_was_written(raw: dict[str, Any]) -> None:
    doc = parse(raw)
    assert doc.initial_password in {"pw", VERIFIER}
    assert doc.admin_user == "dbi_admin" and doc.port == 5432


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        pytest.param([], "not a JSON object", id="not-an-object"),
        pytest.param({"version": 9, "admin_verifier": VERIFIER}, "version: 9", id="newer"),
        pytest.param({"version": 5}, "admin_verifier: the document has no", id="no-credential"),
        pytest.param({"admin_verifier": "md5abc"}, "admin_verifier: not a SCRAM", id="md5"),
        pytest.param(
            {"admin_verifier": VERIFIER, "admin_user": "Robert'); DROP"}, "admin_user", id="user"
        ),
        pytest.param({"admin_verifier": VERIFIER, "port": "5432"}, "port: str", id="port-type"),
        pytest.param(
            {"admin_verifier": VERIFIER, "upgrade": {"from_major": 17, "token": "t"}},
            "upgrade.to_major: missing",
            id="upgrade-half",
        ),
        pytest.param(
            {
                "admin_verifier": VERIFIER,
                "upgrade": {"from_major": 17, "to_major": 18, "token": "t", "action": "undo"},
            },
            "upgrade.action",
            id="upgrade-action",
        ),
        pytest.param(
            {"admin_verifier": VERIFIER, "restore": {"backup": "b", "base_url": "u"}},
            "restore.wal_url: missing",
            id="restore-half",
        ),
        pytest.param({"admin_verifier": VERIFIER, "port": True}, "port: bool", id="bool"),
        pytest.param(
            {
                "admin_verifier": VERIFIER,
                "restore": {"backup": "b", "base_url": "u", "wal_url": "w", "target_lsn": "0/3'"},
            },
            'restore.target_lsn: "0/3\'" is not a WAL location',
            id="restore-lsn",
        ),
        pytest.param(
            {"admin_verifier": VERIFIER, "replica": {**REPLICA, "slot": "x'; DROP"}},
            "replica.slot",
            id="replica-slot",
        ),
        pytest.param(
            {
                "admin_verifier": VERIFIER,
                "replica": {k: v for k, v in REPLICA.items() if k != "ca"},
            },
            "replica.ca: missing",
            id="replica-ca",
        ),
    ],
)
def test_a_document_the_guest_cannot_act_on_names_the_field(raw: Any, named: str) -> None:
    with pytest.raises(Invalid, match=named.replace("(", r"\(").replace(")", r"\)")):
        parse(raw)
