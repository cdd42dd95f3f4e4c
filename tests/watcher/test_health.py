"""What the watcher's readiness reads (plain data): watch states and the Lease loop."""

from __future__ import annotations

import time
from datetime import timedelta

from dbi.streams import WatchState, silence_seconds
from watcher.leader import LeaderElection, _now


def test_a_watch_not_listed_yet_is_not_ready() -> None:
    state = WatchState()
    assert state.problem("Secret", grace=20) == "the Secret watch has not listed yet"
    state.failed(ConnectionRefusedError())
    assert state.problem("Secret", 20) == (
        "the Secret watch has not listed yet (ConnectionRefusedError)"
    )


def test_a_hiccup_shorter_than_the_grace_is_no_reason() -> None:
    state = WatchState()
    state.listed()
    state.failed(TimeoutError())
    assert state.problem("Secret", grace=20) is None
    state.since = time.monotonic() - 25
    assert state.problem("Secret", grace=20) == (
        "the Secret watch has not been live for 25s (TimeoutError)"
    )
    state.listed()  # an event, a bookmark: live again
    assert state.problem("Secret", grace=20) is None


def test_a_watch_is_stalled_after_twice_its_timeout_at_most_90s() -> None:
    assert silence_seconds(5) == 10
    assert silence_seconds(240) == 90


def test_a_standby_is_ready_while_its_lease_loop_reaches_the_api_server() -> None:
    election = LeaderElection(api=None, namespace="dbi-system", identity="b", duration=15)  # type: ignore[arg-type]
    assert election.problem() == (
        "standby, and the Lease loop cannot reach the API server (not tried yet)"
    )
    election.answered, election.error = _now(), ""
    assert election.problem() is None
    election.answered = _now() - timedelta(seconds=31)
    election.error = "MaxRetryError"
    assert "cannot reach the API server (MaxRetryError)" in (election.problem() or "")
