"""Prove a backup is real: unpack it from the store and start PostgreSQL on it.

The backup's base.tar.gz becomes a data directory and pg_wal.tar.gz its pg_wal (the WAL
pg_basebackup streamed); PostgreSQL replays that WAL to a consistent state and opens.
Unix socket only, trust for the local user, TLS off: a scratch server for the test to
query, stopped and removed when the block ends, also when the test fails.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from activities.infra.backupstore import MANIFEST, Store
from dbi.backups import Taken
from devstack import postgresql
from devstack.vmstandin.guest import make_traversable
from tests import polling


@contextmanager
def restored(store: Store, prefix: str, *, major: int = 18) -> Iterator[str]:
    """Yield the conninfo of a scratch PostgreSQL started on the backup at ``prefix``."""
    with tempfile.TemporaryDirectory(prefix="dbi-restore-") as tmp:
        pgdata, socket_dir = Path(tmp) / "data", Path(tmp) / "socket"
        manifest = store.read(prefix + MANIFEST)
        assert manifest is not None, f"no backup at {prefix}"
        taken = Taken.model_validate_json(manifest)
        for name in ("base.tar.gz", "pg_wal.tar.gz"):
            store.download(prefix + taken.key(name), Path(tmp) / name)
        with tarfile.open(Path(tmp) / "base.tar.gz") as tar:
            tar.extractall(pgdata, filter="data")
        with tarfile.open(Path(tmp) / "pg_wal.tar.gz") as tar:
            tar.extractall(pgdata / "pg_wal", filter="data")
        (pgdata / "pg_hba.conf").write_text("local all all trust\n")
        socket_dir.mkdir()
        pgdata.chmod(0o700)
        user = "nobody" if os.geteuid() == 0 else None
        if user is not None:
            make_traversable(Path(tmp))
            subprocess.run(["chown", "-R", user, tmp], check=True)
        server = subprocess.Popen(
            [
                str(postgresql.bin_dir(postgresql.BY_MAJOR[major]) / "postgres"),
                "-D",
                str(pgdata),
                "-c",
                "listen_addresses=",
                "-c",
                f"unix_socket_directories={socket_dir}",
                "-c",
                "ssl=off",
            ],
            user=user,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        conninfo = f"host={socket_dir} user=dbi_admin dbname=postgres connect_timeout=3"
        try:
            polling.eventually(lambda: _answers(conninfo), timeout=60, what="the restored server")
            yield conninfo
        finally:
            server.terminate()
            server.wait(30)


def _answers(conninfo: str) -> bool:
    try:
        with psycopg.connect(conninfo):
            return True
    except psycopg.OperationalError:
        return False
