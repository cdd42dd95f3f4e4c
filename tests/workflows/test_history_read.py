"""When a run that reads its history only where a replay reads the same continues as
new (workflows.state.HistoryRead; engine.md, Lifetime)."""

from __future__ import annotations

from workflows.state import PASS_EVENTS, UNREAD_PASSES, HistoryRead

LIMIT = 150


def test_a_run_continues_once_its_history_held_the_limit_when_read() -> None:
    assert not HistoryRead(length=149, suggested=False, passes=3).too_long(limit=LIMIT, passes=4)
    assert HistoryRead(length=150, suggested=False, passes=3).too_long(limit=LIMIT, passes=4)


def test_a_run_continues_when_the_server_suggested_it() -> None:
    assert HistoryRead(length=10, suggested=True, passes=3).too_long(limit=LIMIT, passes=4)


def test_a_run_whose_waits_never_block_still_continues() -> None:
    """Wakes that always come during the pass leave the read where it was: the run ends
    after UNREAD_PASSES passes, not never."""
    read = HistoryRead(length=3, suggested=False, passes=7)
    assert not read.too_long(limit=LIMIT, passes=7 + UNREAD_PASSES - 1)
    assert read.too_long(limit=LIMIT, passes=7 + UNREAD_PASSES)


def test_a_run_that_reads_only_at_timers_counts_each_pass_since_the_read() -> None:
    """timer-history-reads: a run woken pass after pass reads nothing more, and continues
    once the read length plus PASS_EVENTS a pass reaches the limit."""
    read = HistoryRead(length=30, suggested=False, passes=7)
    passes = -(-(LIMIT - 30) // PASS_EVENTS)  # passes until the count reaches the limit
    assert not read.too_long(limit=LIMIT, passes=7 + passes - 1, counted=True)
    assert read.too_long(limit=LIMIT, passes=7 + passes, counted=True)
    assert HistoryRead(length=10, suggested=True, passes=7).too_long(
        limit=LIMIT, passes=7, counted=True
    )
    # The count does not wait for UNREAD_PASSES, nor stop at it.
    assert HistoryRead(length=3, suggested=False, passes=0).too_long(
        limit=LIMIT, passes=UNREAD_PASSES, counted=True
    )
