"""A backup as the stubs report it taken."""

from __future__ import annotations

from dbi.backups import (
    Taken,
    WalRange,
)

TAKEN = Taken(
    backup="orders-20261201-030000",
    size_bytes=4096,
    postgres_version="18.6",
    wal=WalRange(start="0/2000028", end="0/2000100", timeline=1),
    location="file:///backups/team-a/orders/orders-20261201-030000/",
    files=["backup_manifest", "base.tar.gz", "pg_wal.tar.gz"],
)
