"""``python -m guest.archive SPOOL PATH NAME``: PostgreSQL's ``archive_command`` (the
boot writes it, ``guest.boot.configure_archiving``; ``%p`` and ``%f`` are PATH and NAME).
``python -m guest.archive --restore DIR NAME PATH``: a point-in-time restore's
``restore_command``, on the WAL its boot fetched (``fetch``).

The VM holds no credential to any backup store. Its WAL goes to a spool on the data
disk, outside the data directory, and the orchestrator takes it from there over SQL as
the admin role (``activities.operations.walarchive``):

- While the spool's LEASE says archiving is on until a time still to come (the
  orchestrator renews it on each visit), each file PostgreSQL completes (a segment, a
  timeline's history, a backup's label) is gzipped into the spool as
  ``SYSTEM/NAME.gz``: written under a temporary name, synced, then renamed, so a file
  in the spool is whole. SYSTEM is the database system identifier (pg_control's first
  field): WAL of one initdb's lineage, which a restore or a major upgrade starts anew.
- The orchestrator reads each ``*.gz`` (``pg_read_binary_file``), stores it, then
  writes the names it stored to UPLOADED; the next run here deletes those.
- PostgreSQL keeps a WAL file in ``pg_wal`` until this exits 0, and the spool keeps it
  until it is stored: a guest that dies mid-copy copies again, a worker that dies
  mid-upload leaves the file for the next visit. A file archived twice is the same file.
- Without a lease in force (no backups, or no visit for LEASE_SECONDS: the
  orchestrator's archiving is down), the file is not kept, and this says so on stderr
  (PostgreSQL's log): a spool nobody empties would fill the disk the database needs.
  A lease caught while the orchestrator rewrites it (empty) is neither: this exits 1,
  and PostgreSQL tries again.

Exit codes: 0 the file is kept (or, archiving off, let go); 1 it could not be kept
(PostgreSQL tries again). For ``--restore``: 0 the file is in place, 1 the archive has
no such file (the end of what there is to replay).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import time
import urllib.request
from pathlib import Path

from guest.files import SPOOL_LEASE as LEASE
from guest.files import SPOOL_UPLOADED as UPLOADED
from guest.files import SPOOLED_SUFFIX as SUFFIX

PARTIAL = ".partial"
# An empty lease written this recently is being rewritten (``leased``).
REWRITE_SECONDS = 60


def leased(spool: Path, now: float) -> bool | None:
    """Whether the orchestrator's lease on archiving is in force at ``now``; None while
    the orchestrator rewrites it: its ``COPY ... TO`` empties the file, then writes it,
    and a read in between finds it empty (an empty lease older than REWRITE_SECONDS is
    no lease: a write that never finished)."""
    path = spool / LEASE
    try:
        text = path.read_text()
        if not text.strip() and now - path.stat().st_mtime < REWRITE_SECONDS:
            return None
        word, until = text.split()
    except (OSError, ValueError):
        return False
    return word == "until" and until.isdigit() and now < int(until)


def system_identifier(pgdata: Path) -> str:
    """The database system identifier: pg_control's first field (a uint64, in the
    machine's byte order)."""
    with (pgdata / "global" / "pg_control").open("rb") as control:
        return str(int.from_bytes(control.read(8), sys.byteorder))


def prune(spool: Path) -> None:
    """Delete the files the orchestrator says it stored (``SYSTEM/NAME.gz`` lines)."""
    try:
        stored = (spool / UPLOADED).read_text().split()
    except OSError:
        return
    for line in stored:
        system, _, name = line.partition("/")
        if system.isdigit() and name.endswith(SUFFIX) and "/" not in name:
            (spool / system / name).unlink(missing_ok=True)


def keep(spool: Path, source: Path, name: str, system: str) -> None:
    """Gzip ``source`` into the spool as ``system/name.gz``, whole or not at all (once:
    a file archived again is the same file)."""
    folder = spool / system
    folder.mkdir(mode=0o700, exist_ok=True)
    final = folder / (name + SUFFIX)
    if final.exists():
        return
    partial = folder / (name + SUFFIX + PARTIAL)
    with source.open("rb") as src, partial.open("wb") as raw:
        with gzip.GzipFile(filename=name, mode="wb", fileobj=raw, compresslevel=6, mtime=0) as gz:
            shutil.copyfileobj(src, gz, 1 << 20)
        raw.flush()
        os.fsync(raw.fileno())
    partial.rename(final)
    directory = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def archive(spool: Path, pgdata: Path, source: str, name: str, now: float) -> str | None:
    """Archive one file PostgreSQL completed (``source``, relative to ``pgdata``); None,
    or what PostgreSQL's log should say (the file was let go)."""
    prune(spool)
    lease = leased(spool, now)
    if lease is None:  # PostgreSQL tries again in a second: the lease is whole by then
        raise BlockingIOError(f"the lease ({LEASE}) is being rewritten; not archived yet")
    if not lease:
        return f"{name} not kept: WAL archiving is off (no lease from dbi in force)"
    keep(spool, pgdata / source, name, system_identifier(pgdata))
    return None


def fetch(listing_url: str, directory: Path) -> None:
    """Fetch each archived file a restore replays (the JSON object at ``listing_url``:
    name to URL of its gzipped copy) into ``directory``, as stored; progress on stderr."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700, parents=True)
    with urllib.request.urlopen(listing_url, timeout=60) as listed:  # noqa: S310 (file: or https)
        listing = json.load(listed)
    if not isinstance(listing, dict):
        raise RuntimeError("the archive's listing is not a JSON object")
    for i, (name, url) in enumerate(sorted(listing.items())):
        if not isinstance(name, str) or "/" in name or name.startswith("."):
            raise RuntimeError(f"the archive's listing names {name!r}")
        print(f"dbi-bootstrap: fetching WAL {name} ({i + 1}/{len(listing)})", file=sys.stderr)
        partial = directory / (name + SUFFIX + PARTIAL)
        with urllib.request.urlopen(url, timeout=60) as got, partial.open("wb") as out:  # noqa: S310
            shutil.copyfileobj(got, out, 1 << 20)
        partial.rename(directory / (name + SUFFIX))


def restore(directory: Path, name: str, target: Path) -> bool:
    """Put the fetched file ``name`` at ``target`` (ungzipped); whether there was one."""
    source = directory / (name + SUFFIX)
    if "/" in name or not source.exists():
        return False
    partial = target.with_name(target.name + PARTIAL)
    with gzip.open(source, "rb") as src, partial.open("wb") as out:
        shutil.copyfileobj(src, out, 1 << 20)
    partial.rename(target)
    return True


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 4 and args[0] == "--restore":
        try:  # PostgreSQL runs restore_command in its data directory
            return 0 if restore(Path(args[1]), args[2], Path.cwd() / args[3]) else 1
        except OSError as e:
            print(f"dbi-restore: {args[2]}: {e}", file=sys.stderr)
            return 1
    if len(args) != 3 or "/" in args[2]:
        print("usage: python -m guest.archive SPOOL %p %f", file=sys.stderr)
        return 1
    spool, source, name = Path(args[0]), args[1], args[2]
    try:  # PostgreSQL runs archive_command in its data directory
        said = archive(spool, Path.cwd(), source, name, time.time())
    except OSError as e:
        print(f"dbi-archive: {name}: {e}", file=sys.stderr)
        return 1
    if said is not None:
        print(f"dbi-archive: {said}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
