"""When a run that reads its history only where a replay reads the same continues as
new (workflows.state.HistoryRead; engine.md, Lifetime)."""

from __future__ import annotations

from workflows.state import PASS_EVENTS, HistoryRead

LIMIT = 150


def test_a_run_continues_once_its_history_held_the_limit_when_read() -> None:
    assert not HistoryRead(length=149, suggested=False, passes=3).too_long(limit=LIMIT, passes=3)
    assert HistoryRead(length=150, suggested=False, passes=3).too_long(limit=LIMIT, passes=3)


def test_a_run_continues_when_the_server_suggested_it() -> None:
    assert HistoryRead(length=10, suggested=True, passes=3).too_long(limit=LIMIT, passes=3)


def test_a_run_woken_pass_after_pass_counts_each_pass_since_the_read() -> None:
    """A run woken pass after pass reads nothing more (no timer fires), and continues
    once the read length plus PASS_EVENTS a pass reaches the limit: never, it is not."""
    read = HistoryRead(length=30, suggested=False, passes=7)
    passes = -(-(LIMIT - 30) // PASS_EVENTS)  # passes until the count reaches the limit
    assert not read.too_long(limit=LIMIT, passes=7 + passes - 1)
    assert read.too_long(limit=LIMIT, passes=7 + passes)
