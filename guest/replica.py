"""A replica's boot (a document with ``replica``, version 8): clone the primary once,
then stream from it.

The first boot runs ``pg_basebackup`` (WAL streamed alongside, through the member's
replication slot) into ``pgdata.cloning`` and moves it into place only when complete;
a boot cut short clones again. Every boot writes the connection to the primary:
``dbi-replica.conf`` (``primary_conninfo`` with ``sslmode=verify-full`` against the
document's CA, the password in a private passfile on the data disk, never in a setting;
``primary_slot_name``) and ``standby.signal``. A boot whose document has no ``replica``
empties ``dbi-replica.conf`` and leaves ``standby.signal`` as it finds it: only
``pg_promote`` (the orchestrator's) makes a standby a primary, never a boot.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from guest import files
from guest.disk import Host, conf_quote, include, pgdata, tail
from guest.document import Document, Replica

CLONING = f"{files.DATA}.cloning"


def clone(doc: Document, disk: Path, host: Host, major: int) -> None:
    """Copy the primary's data directory with pg_basebackup (the server up there)."""
    source = doc.replica
    assert source is not None
    _write_secrets(source, disk, host)
    cloning = disk / CLONING
    shutil.rmtree(cloning, ignore_errors=True)
    ran = host.run(
        [
            host.tool(major, "pg_basebackup"),
            "--pgdata",
            str(cloning),
            "--dbname",
            conninfo(source, disk),
            "--wal-method=stream",
            "--checkpoint=fast",
            "--slot",
            source.slot,
            "--no-password",
        ],
        cwd=disk,
    )
    if ran.returncode != 0:
        shutil.rmtree(cloning, ignore_errors=True)
        raise RuntimeError(
            f"pg_basebackup from {source.host} exited {ran.returncode}: "
            + tail(ran.stdout + ran.stderr)
        )
    cloning.chmod(0o700)
    shutil.rmtree(pgdata(disk), ignore_errors=True)
    cloning.rename(pgdata(disk))


def configure(doc: Document, disk: Path, host: Host) -> None:
    """Write the connection to the primary and ``standby.signal`` (a replica's document),
    or empty the connection (a primary's)."""
    data = pgdata(disk)
    conf = data / files.REPLICA_CONF
    source = doc.replica
    if source is None:
        if conf.exists():
            conf.write_text("")
        return
    _write_secrets(source, disk, host)
    conf.write_text(
        f"primary_conninfo = '{conf_quote(conninfo(source, disk))}'\n"
        f"primary_slot_name = '{conf_quote(source.slot)}'\n"
    )
    signal = data / "standby.signal"
    signal.touch()
    for path in (conf, signal):
        path.chmod(0o600)
        host.own(path)
    include(data, files.REPLICA_CONF)


def conninfo(source: Replica, disk: Path) -> str:
    """libpq's connection string to the primary: verified TLS, the password in a file."""
    fields = {
        "host": source.host,
        "hostaddr": source.hostaddr,
        "port": str(source.port),
        "user": source.user,
        "passfile": str(disk / files.REPLICA_PASSFILE),
        "sslmode": "verify-full",
        "sslrootcert": str(disk / files.REPLICA_CA),
        # No client certificate: a file never written (libpq skips a missing one;
        # its default, under HOME, may be unreadable to PostgreSQL's user).
        "sslcert": str(disk / files.REPLICA_NO_CERT),
        "application_name": source.application_name,
    }
    return " ".join(f"{k}={_quote(v)}" for k, v in fields.items() if v)


def _quote(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def _write_secrets(source: Replica, disk: Path, host: Host) -> None:
    """The passfile and the CA, mode 0600, owned by PostgreSQL's user."""
    password = source.password.replace("\\", "\\\\").replace(":", "\\:")
    written = {
        files.REPLICA_PASSFILE: f"*:*:*:{source.user}:{password}\n",
        files.REPLICA_CA: source.ca,
    }
    for name, content in written.items():
        path = disk / name
        path.touch(mode=0o600)
        path.chmod(0o600)
        host.own(path)
        path.write_text(content)
