"""The guest's archive_command on plain files: a WAL file is kept whole in the spool
under its system's identifier while dbi's lease is in force, once; let go without one;
tried again, never let go, while dbi rewrites the lease; deleted once dbi says it
stored it; and what PostgreSQL sees (exit codes)."""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path

import pytest

from guest import archive, files

SEGMENT = "000000010000000000000003"
SYSTEM = 7458123456789012345
NOW = 1_800_000_000.0


@pytest.fixture
def pgdata(tmp_path: Path) -> Path:
    data = tmp_path / "pgdata"
    (data / "global").mkdir(parents=True)
    (data / "global" / "pg_control").write_bytes(SYSTEM.to_bytes(8, sys.byteorder) + b"\0" * 8)
    (data / "pg_wal").mkdir()
    (data / "pg_wal" / SEGMENT).write_bytes(bytes(range(256)) * 4096)
    return data


@pytest.fixture
def spool(tmp_path: Path) -> Path:
    path = tmp_path / "wal-spool"
    path.mkdir()
    return path


def lease(spool: Path, until: float) -> None:
    (spool / files.SPOOL_LEASE).write_text(f"until {int(until)}\n")


def test_a_segment_is_kept_whole_under_its_system_once(pgdata: Path, spool: Path) -> None:
    lease(spool, NOW + 60)
    assert archive.archive(spool, pgdata, f"pg_wal/{SEGMENT}", SEGMENT, NOW) is None
    kept = spool / str(SYSTEM) / f"{SEGMENT}.gz"
    assert gzip.decompress(kept.read_bytes()) == (pgdata / "pg_wal" / SEGMENT).read_bytes()
    assert [p.name for p in kept.parent.iterdir()] == [kept.name]  # no partial left

    # Archived again (PostgreSQL crashed before marking it done): the same file stays.
    written = kept.stat().st_mtime_ns
    (pgdata / "pg_wal" / SEGMENT).write_bytes(b"recycled")
    assert archive.archive(spool, pgdata, f"pg_wal/{SEGMENT}", SEGMENT, NOW) is None
    assert kept.stat().st_mtime_ns == written


@pytest.mark.parametrize(
    "lease_text", [None, f"until {int(NOW)}\n", "until soon\n", "on\n", f"until {int(NOW) + 9} x"]
)
def test_without_a_lease_in_force_the_file_is_let_go(
    pgdata: Path, spool: Path, lease_text: str | None
) -> None:
    if lease_text is not None:
        (spool / files.SPOOL_LEASE).write_text(lease_text)
    said = archive.archive(spool, pgdata, f"pg_wal/{SEGMENT}", SEGMENT, NOW)
    assert said is not None and "WAL archiving is off" in said and SEGMENT in said
    assert not (spool / str(SYSTEM)).exists()


def test_a_lease_caught_while_dbi_rewrites_it_lets_nothing_go(
    pgdata: Path, spool: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """dbi's COPY empties the lease before it writes it: an archive_command that reads it
    then exits 1 (PostgreSQL tries again) instead of letting the segment go, a gap in
    the archive that no restore could cross. A lease left empty long ago is none."""
    monkeypatch.chdir(pgdata)
    path = spool / files.SPOOL_LEASE
    path.write_text("")
    assert archive.main([str(spool), f"pg_wal/{SEGMENT}", SEGMENT]) == 1
    assert "being rewritten" in capsys.readouterr().err
    assert not (spool / str(SYSTEM)).exists()

    path.write_text(f"until {int(NOW) + 60}\n")  # the write is done: kept
    assert archive.archive(spool, pgdata, f"pg_wal/{SEGMENT}", SEGMENT, NOW) is None
    assert (spool / str(SYSTEM) / f"{SEGMENT}.gz").exists()

    path.write_text("")
    os.utime(path, (NOW - archive.REWRITE_SECONDS, NOW - archive.REWRITE_SECONDS))
    said = archive.archive(spool, pgdata, "pg_wal/other", "000000010000000000000004", NOW)
    assert said is not None and "WAL archiving is off" in said


def test_what_dbi_stored_is_deleted_and_nothing_else(pgdata: Path, spool: Path) -> None:
    lease(spool, NOW + 60)
    folder = spool / str(SYSTEM)
    folder.mkdir()
    for name in ("000000010000000000000001.gz", "000000010000000000000002.gz", "keep.gz"):
        (folder / name).write_bytes(b"x")
    outside = spool.parent / "secret.gz"
    outside.write_bytes(b"x")
    (spool / files.SPOOL_UPLOADED).write_text(
        f"{SYSTEM}/000000010000000000000001.gz\n{SYSTEM}/000000010000000000000002.gz\n"
        f"../secret.gz\n{SYSTEM}/../../secret.gz\n{SYSTEM}/lease\n"
    )
    archive.archive(spool, pgdata, f"pg_wal/{SEGMENT}", SEGMENT, NOW)
    assert sorted(p.name for p in folder.iterdir()) == [f"{SEGMENT}.gz", "keep.gz"]
    assert outside.exists() and (spool / files.SPOOL_LEASE).exists()


def test_exit_codes_are_what_postgresql_reads(
    pgdata: Path, spool: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(pgdata)
    assert archive.main([str(spool), f"pg_wal/{SEGMENT}", SEGMENT]) == 0  # let go, said so
    assert "WAL archiving is off" in capsys.readouterr().err
    lease(spool, 4_000_000_000)
    assert archive.main([str(spool), "pg_wal/missing", "missing"]) == 1  # PostgreSQL retries
    assert "missing" in capsys.readouterr().err
    assert archive.main([str(spool), "a", "../b"]) == 1
    assert archive.main([str(spool), f"pg_wal/{SEGMENT}", SEGMENT]) == 0
    assert (spool / str(SYSTEM) / f"{SEGMENT}.gz").exists()
