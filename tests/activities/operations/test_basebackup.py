"""pg_basebackup against a guest's real PostgreSQL, bounded: a backup that would stage
more than the scratch limit ends before it fills the disk, one whose server stops
answering ends instead of heartbeating for hours; and the files an attempt uploads are
the only ones its manifest names."""

from __future__ import annotations

import tarfile
import threading
from pathlib import Path
from typing import cast

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.infra.backupstore import MANIFEST, DirectoryStore
from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.operations import basebackup
from dbi.backups import Reason, StoreLocation, Taken, WalRange
from dbi.config import Config
from devstack import postgresql
from tests.guests import Booted
from tests.polling import eventually

pytestmark = pytest.mark.stack


def context(*, scratch: int = 2**30, max_rate: str | None = None) -> Context:
    """A Context for pg_basebackup alone (it reads no Kubernetes object)."""
    settings = Config(
        pg_bin_dir=str(postgresql.bin_dir()),
        backup_scratch_bytes=scratch,
        backup_max_rate=max_rate,
    )
    return Context(kube=cast(Kube, None), config=settings)


def take(ctx: Context, booted: Booted, target: Path) -> ApplicationError | None:
    """Run pg_basebackup as the activity does; what it raised, if anything."""
    try:
        ActivityEnvironment().run(
            basebackup._pg_basebackup,  # the activity's own run of it
            ctx,
            booted.server,
            booted.password,
            target,
            label="test",
        )
    except ApplicationError as e:
        return e
    return None


def test_a_backup_is_whole_within_its_limit(booted: Booted, tmp_path: Path) -> None:
    assert take(context(), booted, tmp_path / "files") is None
    assert {p.name for p in (tmp_path / "files").iterdir()} >= {"base.tar.gz", "pg_wal.tar.gz"}


def test_a_backup_that_needs_more_scratch_than_allowed_ends_before_filling_it(
    booted: Booted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MiB limit: pg_basebackup is stopped once it wrote more, the attempt fails
    BackupScratchFull (no retry helps) naming the setting, and little more was written."""
    monkeypatch.setattr(basebackup, "HEARTBEAT_SECONDS", 0.2)
    ctx = context(scratch=2**20, max_rate="1M")
    failed = take(ctx, booted, tmp_path / "files")
    assert failed is not None and failed.type == Reason.SCRATCH_FULL and failed.non_retryable
    assert "DBI_BACKUP_SCRATCH_LIMIT" in failed.message
    written = sum(p.stat().st_size for p in (tmp_path / "files").rglob("*") if p.is_file())
    assert written < 4 * 2**20


def test_a_backup_whose_server_stops_answering_ends_stalled(
    booted: Booted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guest frozen (SIGSTOP: its kernel still acknowledges) while pg_basebackup
    runs: the attempt ends BackupStalled (retried) once nothing arrived for the stall
    time, instead of heartbeating while waiting."""
    monkeypatch.setattr(basebackup, "STALL_SECONDS", 3.0)
    monkeypatch.setattr(basebackup, "HEARTBEAT_SECONDS", 0.2)
    guest, target = booted.guest, tmp_path / "files"
    assert guest is not None

    def freeze_once_writing() -> None:
        eventually(lambda: basebackup._written(target) > 0, what="pg_basebackup writing")
        guest.freeze()
        threading.Timer(30, guest.thaw).start()  # a stall never noticed fails, not hangs

    freezing = threading.Thread(target=freeze_once_writing, daemon=True)
    freezing.start()
    try:  # slowed to 32 kB/s: it is still copying when frozen
        failed = take(context(max_rate="32k"), booted, target)
    finally:
        freezing.join(30)
        guest.thaw()
    assert failed is not None and failed.type == Reason.STALLED and not failed.non_retryable


def test_the_manifest_names_one_attempts_files_and_the_others_go(tmp_path: Path) -> None:
    """Attempt 1 uploaded a tarball, then was lost; attempt 2 uploads its own and
    completes: the manifest names attempt 2's files, and attempt 1's are removed."""
    store = DirectoryStore(StoreLocation.parse(f"file://{tmp_path}/store"))
    prefix = "team-a/db/db-1/"
    (tmp_path / "f").write_bytes(b"x")
    store.upload(prefix + "1/base.tar.gz", tmp_path / "f")
    for name in ("base.tar.gz", "pg_wal.tar.gz"):
        store.upload(prefix + "2/" + name, tmp_path / "f")
    taken = Taken(
        backup="db-1",
        size_bytes=2,
        postgres_version="18.6",
        wal=WalRange(start="0/1", end="0/2", timeline=1),
        location="",
        files=["2/base.tar.gz", "2/pg_wal.tar.gz"],
    )
    basebackup.complete(store, prefix, taken)
    assert store.keys(prefix) == [prefix + key for key in (*taken.files, MANIFEST)]
    assert taken.key("base.tar.gz") == "2/base.tar.gz"


def test_a_backup_is_verified_against_its_manifest_and_a_damaged_one_is_refused(
    booted: Booted, tmp_path: Path
) -> None:
    """pg_verifybackup passes what pg_basebackup wrote; one file of base.tar.gz changed
    after (a disk or a copy that damaged it) fails the attempt, naming the file, and the
    attempt is retried (it is not kept)."""
    target = tmp_path / "files"
    ctx = context()
    assert take(ctx, booted, target) is None
    ActivityEnvironment().run(basebackup.verify, ctx, target)

    unpacked = tmp_path / "unpacked"
    with tarfile.open(target / "base.tar.gz") as tar:
        tar.extractall(unpacked, filter="data")
    with (unpacked / "PG_VERSION").open("a") as damaged:
        damaged.write("\n")
    with tarfile.open(target / "base.tar.gz", "w:gz", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(unpacked.iterdir()):
            tar.add(path, arcname=path.name)
    with pytest.raises(ApplicationError) as failed:
        ActivityEnvironment().run(basebackup.verify, ctx, target)
    assert failed.value.type == Reason.VERIFY_FAILED and not failed.value.non_retryable
    assert 'file "PG_VERSION"' in failed.value.message, failed.value.message
