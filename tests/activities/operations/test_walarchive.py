"""WAL archiving against a guest's real PostgreSQL (its archive_command is the guest
program's, ``guest.archive``): nothing is kept before dbi's lease; once leased, each
completed segment reaches the store whole, under the database system's identifier;
the guest deletes what was stored, nothing is stored twice; a visit that dies mid-way
loses nothing (the next one stores it); a copy the guest died in is never stored,
and its retry is whole; and a guest killed mid-copy leaves no gap in the store."""

from __future__ import annotations

import gzip
import os
import time
import urllib.request
from pathlib import Path

import pytest
from temporalio.testing import ActivityEnvironment

from activities.infra import postgres
from activities.infra.backupstore import DirectoryStore, S3Store, Store
from activities.operations import walarchive
from dbi import wal
from dbi.backups import StoreKind, StoreLocation
from devstack.vmstandin.kubevirt import Size
from tests.guests import Booted, wait_ready
from tests.polling import eventually
from tests.stack import S3_BUCKET

pytestmark = pytest.mark.stack

SEGMENT_BYTES = 16 * 2**20


def switch(booted: Booted) -> str:
    """Write a little WAL, then complete the segment (the admin role may); the name of
    the segment completed."""
    with postgres.connect(booted.server, password=booted.password) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS t (n int)")
        conn.execute("INSERT INTO t SELECT generate_series(1, 1000)")
        row = conn.execute("SELECT pg_walfile_name(pg_switch_wal())").fetchone()
    assert row is not None
    return str(row[0])


def archived(booted: Booted) -> str | None:
    """The last WAL file PostgreSQL's archiver handed to archive_command with success."""
    with postgres.connect(booted.server, password=booted.password) as conn:
        row = conn.execute("SELECT last_archived_wal FROM pg_stat_archiver").fetchone()
    return str(row[0]) if row and row[0] else None


def visit(booted: Booted, store: Store) -> walarchive.Visit:
    """One visit, as the activity makes it (heartbeating each file)."""
    with postgres.connect(booted.server, password=booted.password) as conn:
        visited: walarchive.Visit = ActivityEnvironment().run(
            walarchive.visit, conn, store, "team-a/db/_wal/uid/"
        )
        return visited


def system(booted: Booted) -> str:
    with postgres.connect(booted.server, password=booted.password) as conn:
        row = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()
    assert row is not None
    return str(row[0])


def spool(booted: Booted) -> Path:
    assert booted.guest is not None
    return booted.guest.disk / "wal-spool"


def test_completed_segments_reach_the_store_once_and_leave_the_guest(
    booted: Booted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryStore(
        StoreLocation(kind=StoreKind.FILE, bucket="", prefix=str(tmp_path / "store"))
    )
    prefix = tmp_path / "store" / f"team-a/db/_wal/uid/{system(booted)}"

    # Before dbi's first visit there is no lease: the segment is let go, not spooled.
    before = switch(booted)
    eventually(lambda: archived(booted) == before, what=f"{before} handed to the guest")
    assert not any(spool(booted).glob("*/*.gz"))
    assert visit(booted, store).stored == []  # and this visit leases

    # Leased: the next segments are spooled whole, then stored whole.
    first, second = switch(booted), switch(booted)
    eventually(lambda: archived(booted) == second, what=f"{second} handed to the guest")
    stored = visit(booted, store)
    assert [s.rsplit("/", 1)[1] for s in stored.stored] == [f"{first}.gz", f"{second}.gz"]
    for name in (first, second):
        assert len(gzip.decompress((prefix / f"{name}.gz").read_bytes())) == SEGMENT_BYTES
    assert before + ".gz" not in {p.name for p in prefix.iterdir()}

    # Stored once: the next visit stores nothing again, and the guest's next
    # archive_command deletes what was stored.
    assert visit(booted, store).stored == []
    third = switch(booted)
    eventually(lambda: archived(booted) == third, what=f"{third} handed to the guest")
    assert sorted(p.name for p in spool(booted).glob("*/*.gz")) == [f"{third}.gz"]

    # A visit that dies after storing one file: nothing is deleted from the guest, and
    # the next visit stores the rest (the first again: the same bytes).
    fourth = switch(booted)
    eventually(lambda: archived(booted) == fourth, what=f"{fourth} handed to the guest")
    writes: list[str] = []
    real_write = store.write

    def dies_after_one(key: str, data: bytes) -> None:
        if writes:
            raise OSError("the worker is gone")
        writes.append(key)
        real_write(key, data)

    monkeypatch.setattr(store, "write", dies_after_one)
    with pytest.raises(OSError, match="the worker is gone"):
        visit(booted, store)
    monkeypatch.setattr(store, "write", real_write)
    assert sorted(p.name for p in spool(booted).glob("*/*.gz")) == [f"{third}.gz", f"{fourth}.gz"]
    assert [s.rsplit("/", 1)[1] for s in visit(booted, store).stored] == [
        f"{third}.gz",
        f"{fourth}.gz",
    ]
    assert {f"{n}.gz" for n in (first, second, third, fourth)} <= {p.name for p in prefix.iterdir()}


def test_a_tenants_s3_bucket_takes_the_segments_whole(
    booted: Booted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_endpoint: str
) -> None:
    """The same visit into an S3 store (gofakes3): what the worker writes to a tenant's
    bucket, where a point-in-time restore fetches it from by presigned URL."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "dbi-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "dbi-test-secret")
    store = S3Store(StoreLocation.parse(f"s3://{S3_BUCKET}/{tmp_path.name}/"), endpoint=s3_endpoint)
    visit(booted, store)  # leased, and whatever the spool held is stored
    name = switch(booted)
    eventually(lambda: archived(booted) == name, what=f"{name} handed to the guest")
    stored = visit(booted, store)
    assert [s.rsplit("/", 1)[1] for s in stored.stored] == [f"{name}.gz"]
    key = f"team-a/db/_wal/uid/{system(booted)}/{name}.gz"
    with urllib.request.urlopen(store.url(key), timeout=10) as fetched:  # noqa: S310 (http)
        assert len(gzip.decompress(fetched.read())) == SEGMENT_BYTES


def test_a_copy_the_guest_died_in_is_not_stored_and_its_retry_is_whole(
    booted: Booted, tmp_path: Path
) -> None:
    """archive_command killed mid-gzip (the guest's VM lost) leaves ``NAME.gz.partial``,
    owned by the server's user: a visit does not store it, and PostgreSQL's retry of that
    segment (it never heard 0) writes it whole over it."""
    store = DirectoryStore(
        StoreLocation(kind=StoreKind.FILE, bucket="", prefix=str(tmp_path / "store"))
    )
    visit(booted, store)  # leased, and whatever the spool held is stored
    with postgres.connect(booted.server, password=booted.password) as conn:
        row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
    assert row is not None
    name = str(row[0])
    folder = spool(booted) / system(booted)
    folder.mkdir(exist_ok=True)
    partial = folder / f"{name}.gz.partial"
    partial.write_bytes(gzip.compress(b"\0" * 4096)[:100])  # cut short
    owner = spool(booted).stat()
    os.chown(partial, owner.st_uid, owner.st_gid)
    assert visit(booted, store).stored == []

    assert switch(booted) == name
    eventually(lambda: archived(booted) == name, what=f"{name} handed to the guest")
    assert [s.rsplit("/", 1)[1] for s in visit(booted, store).stored] == [f"{name}.gz"]
    kept = tmp_path / "store" / f"team-a/db/_wal/uid/{system(booted)}/{name}.gz"
    assert len(gzip.decompress(kept.read_bytes())) == SEGMENT_BYTES
    assert not partial.exists()


def copying(spool: Path) -> bool:
    """Whether an archive_command into ``spool`` runs now."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue  # gone since it was listed
        if b"guest.archive" in argv and str(spool).encode() in argv:
            return True
    return False


def test_a_guest_that_loses_power_while_archiving_loses_no_segment(
    booted: Booted, tmp_path: Path
) -> None:
    """The guest's VM killed (SIGKILL of PostgreSQL and archive_command) while a segment
    is being copied into the spool, then booted again: PostgreSQL archives that segment
    again after its crash recovery, and the store holds every segment from the lease on,
    each whole, without a gap, which is what a replay needs. (Runs last in this module:
    it restarts the module's guest.)"""
    assert booted.guest is not None
    store = DirectoryStore(
        StoreLocation(kind=StoreKind.FILE, bucket="", prefix=str(tmp_path / "store"))
    )
    visit(booted, store)  # leased, and whatever the spool held is stored
    with postgres.connect(booted.server, password=booted.password) as conn:
        row = conn.execute("SELECT pg_walfile_name(pg_current_wal_lsn())").fetchone()
        assert row is not None
        first = wal.segment(str(row[0]))
        conn.execute("CREATE TABLE IF NOT EXISTS filler (n int, s text)")
    assert first is not None
    caught = False
    for _ in range(20):  # each round writes two segments or so; one copy is caught mid-way
        with postgres.connect(booted.server, password=booted.password) as conn:
            conn.execute(
                "INSERT INTO filler SELECT g, md5(g::text) FROM generate_series(1, 200000) g"
            )
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not caught:
            caught = copying(spool(booted))
            time.sleep(0.002)
        if caught:
            booted.guest.crash()  # the VM loses power mid-copy
            break
    assert caught, "no archive_command was caught copying in 20 rounds"
    booted.guest.forget()
    booted.guest.boot(Size(1, 1, 1, 1, 512 << 20, 512 << 20))
    wait_ready(booted.guest, "the guest's PostgreSQL back after the crash")

    last = switch(booted)
    eventually(lambda: archived(booted) == last, what=f"{last} handed to the guest")
    visit(booted, store)
    prefix = tmp_path / "store" / f"team-a/db/_wal/uid/{system(booted)}"
    stored = sorted(p.name for p in prefix.iterdir())
    assert not [name for name in stored if not name.endswith(".gz")], stored
    assert wal.needed(stored, first).problem is None, stored  # no gap from the lease on
    for name in stored:
        if wal.segment(name.removesuffix(".gz")) is not None:
            assert len(gzip.decompress((prefix / name).read_bytes())) == SEGMENT_BYTES, name
