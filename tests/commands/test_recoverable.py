"""What `dbi backups NAME` says a restore can return to (plain data)."""

from __future__ import annotations

from typing import Any

from commands.backups import recoverable


def backup(phase: str, finished: str | None) -> dict[str, Any]:
    return {"status": {"phase": phase, **({"finishedAt": finished} if finished else {})}}


def test_the_window_is_the_ends_of_the_completed_backups() -> None:
    items = [
        backup("Completed", "2026-12-06T03:00:04Z"),
        backup("Failed", "2026-12-07T03:00:09Z"),
        backup("Completed", "2026-12-05T03:00:05Z"),
        backup("Running", None),
    ]
    assert recoverable(items) == (
        "recoverable: the end of one of its 2 completed backups, from 2026-12-05T03:00:05Z "
        "to 2026-12-06T03:00:04Z (nothing between: base backups only)"
    )
    assert recoverable(items[:1]) == (
        "recoverable: the end of its one completed backup, 2026-12-06T03:00:04Z"
    )
    assert recoverable(items[1:2]) == "recoverable: nothing yet (no completed backup)"


def test_with_wal_archived_any_moment_after_a_backup_begun_since_is_recoverable() -> None:
    def begun(started: str, finished: str) -> dict[str, Any]:
        item = backup("Completed", finished)
        item["status"]["startedAt"] = started
        return item

    items = [
        begun("2026-12-04T03:00:00Z", "2026-12-04T03:00:05Z"),  # before archiving began
        begun("2026-12-05T03:00:00Z", "2026-12-05T03:00:05Z"),
        begun("2026-12-06T03:00:00Z", "2026-12-06T03:00:04Z"),
    ]
    archive = {
        "since": "2026-12-04T12:00:00Z",
        "lastArchivedAt": "2026-12-07T10:15:00Z",
        "lastArchivedWAL": "00000001000000000000002A",
        "checkedAt": "2026-12-07T10:16:00Z",
    }
    assert recoverable(items, archive) == (
        "recoverable: any moment from 2026-12-05T03:00:05Z to about 2026-12-07T10:15:00Z "
        "(archived WAL to 00000001000000000000002A: spec.restore.pointInTime); before it, "
        "the end of 1 earlier backup(s)"
    )
    # No backup begun since archiving began, or nothing archived yet: base backups only.
    assert recoverable(items[:1], archive) == (
        "recoverable: the end of its one completed backup, 2026-12-04T03:00:05Z"
    )
    checked_only = {"checkedAt": "2026-12-07T10:16:00Z"}
    assert recoverable(items[1:2], checked_only) == (
        "recoverable: the end of its one completed backup, 2026-12-05T03:00:05Z"
    )
