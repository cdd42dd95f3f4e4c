"""WAL file names and what a restore needs from the archive (plain data)."""

from __future__ import annotations

import pytest

from dbi import wal
from dbi.wal import Segment


def names(*segments: str) -> list[str]:
    return [f"{s}.gz" for s in segments]


def test_names_and_lsns_map_to_segments() -> None:
    assert wal.segment("000000010000000000000003") == Segment(1, 3)
    assert wal.segment("0000000200000001000000FF") == Segment(2, 511)
    assert Segment(2, 511).name == "0000000200000001000000FF"
    assert Segment(1, 256).name == "000000010000000100000000"
    for other in ("00000002.history", "000000010000000000000002.00000028.backup", "x"):
        assert wal.segment(other) is None
    assert wal.holding("0/2000028", 1) == Segment(1, 2)
    assert wal.holding("1/FF000000", 1) == Segment(1, 511)


def test_the_archive_lags_by_the_wal_written_past_the_newest_stored_segment() -> None:
    # Segment 5 of timeline 1 ends at 0/6000000; the server has written two more.
    assert wal.lag_bytes("0/7FFFFFF", "000000010000000000000005") == 2 * wal.SEGMENT_BYTES - 1
    assert wal.lag_bytes("0/6000000", "000000010000000000000005") == 0
    assert wal.lag_bytes("1/0", "0000000200000000000000FF") == 0  # the high part's last
    assert wal.lag_bytes("0/1000000", "000000010000000000000005") == 0  # not behind
    with pytest.raises(ValueError, match="is not a WAL segment's name"):
        wal.lag_bytes("0/1", "00000002.history")


def test_a_restore_needs_every_segment_from_the_backups_start_and_the_histories() -> None:
    archived = names(
        "000000010000000000000001",  # before the backup: not fetched
        "000000010000000000000002",
        "000000010000000000000002.00000028.backup",
        "000000010000000000000003",
        "0000000100000000000000FF",
    )
    archived = [a for a in archived if "FF" not in a] + names(
        "00000002.history", "000000020000000000000004"
    )
    got = wal.needed(archived, Segment(1, 2))
    assert got.problem is None
    assert got.files == ["00000002.history", "000000010000000000000002", "000000010000000000000003"]
    assert got.last == Segment(1, 3)


def test_a_gap_or_a_missing_start_is_named() -> None:
    gap = wal.needed(names("000000010000000000000002", "000000010000000000000004"), Segment(1, 2))
    assert gap.files == [] and gap.problem is not None
    assert "000000010000000000000003 is missing" in gap.problem
    assert "resumes at 000000010000000000000004" in gap.problem
    assert not gap.none_since  # WAL past the backup's start is stored: a gap, not a lag
    late = wal.needed(names("000000010000000000000005"), Segment(1, 2))
    assert late.problem is not None and "000000010000000000000002" in late.problem
    assert "began after this backup" in late.problem
    assert not late.none_since  # later WAL stored, the start not: a hole
    for archived in ([], names("000000010000000000000001")):
        lagging = wal.needed(archived, Segment(1, 2))
        assert lagging.problem is not None and lagging.none_since  # nothing stored since


def test_retention_drops_the_wal_before_the_oldest_kept_backup_and_nothing_after() -> None:
    archived = [
        *names(
            "00000002.history",
            "000000010000000000000001",
            "000000010000000000000002",
            "000000010000000000000002.00000028.backup",
            "000000010000000000000003",
            "000000010000000000000003.00000028.backup",
            "000000010000000000000004.partial",
            "000000020000000000000004",
            "000000020000000000000005",
        ),
        "000000010000000000000001.gz.partial",  # a file still being written: not ours
    ]
    starts = [Segment(2, 5), Segment(1, 3)]  # the kept backups begin in these
    assert wal.prunable(archived, starts) == sorted(
        names(
            "000000010000000000000001",
            "000000010000000000000002",
            "000000010000000000000002.00000028.backup",
        )
    )
    # Whatever the archive holds from the oldest start on stays; without a kept backup
    # (one may be starting) nothing goes.
    assert wal.prunable(archived, [Segment(1, 1)]) == []
    assert wal.prunable(archived, []) == []
    assert wal.prunable(names("0000000100000001000000FF"), [Segment(1, 256)]) == []
    assert wal.prunable(names("0000000100000000000000FF"), [Segment(1, 256)]) == names(
        "0000000100000000000000FF"
    )


def test_the_system_an_upgrade_replaced_goes_once_no_kept_backup_is_of_it() -> None:
    """System identifiers grow with the time of their initdb: 7300… before an upgrade,
    7400… after it."""
    old, new, newer = "7300000000000000001", "7400000000000000002", "7500000000000000003"
    # Backups of the old system are kept: nothing goes, the new one's WAL included.
    assert wal.superseded([old, new], [old]) == []
    # The new system's backups are all that is kept: the old system's WAL goes whole.
    assert wal.superseded([old, new], [new]) == [old]
    # A newer system with no kept backup yet stays; so does all of it without any kept
    # backup (one may be starting), and a name that is no identifier.
    assert wal.superseded([old, new, newer], [new]) == [old]
    assert wal.superseded([old, new], []) == []
    assert wal.superseded(["tmp", old], [new]) == [old]
