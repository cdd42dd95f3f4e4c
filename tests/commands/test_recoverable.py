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
