"""How the workflow waits after a pass, with plain data."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest

from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome
from tests.dbi.passes import converged, held_then, until
from workflows.waiting import (
    AT_ONCE_LIMIT,
    HEALTH_SPREAD,
    PENDING_CAP,
    PendingStreak,
    Wait,
    backoff,
    next_wait,
    pending_key,
    rechecked,
)

SNAPSHOT = InstanceSnapshot(exists=True, uid="u", health_check_interval_seconds=120)


def test_backoff_doubles_from_five_seconds_and_caps_at_five_minutes() -> None:
    """Transient back-off: 5s, 10s, 20s, ... and never more than 5 minutes."""
    assert [backoff(n).total_seconds() for n in range(1, 10)] == [
        5,
        10,
        20,
        40,
        80,
        160,
        300,
        300,
        300,
    ]


@pytest.mark.parametrize(
    ("pass_", "timeout", "any_signal"),
    [
        pytest.param(converged(), timedelta(seconds=120), True, id="ready-rechecks-at-interval"),
        pytest.param(
            until("vm", Outcome.PENDING, "VMCreated"),
            timedelta(seconds=30),
            True,
            id="pending-default",
        ),
        pytest.param(
            until("health", Outcome.TRANSIENT, "Unreachable"),
            timedelta(seconds=20),
            True,
            id="transient-third",
        ),
        pytest.param(
            until("preflight", Outcome.TERMINAL, "UnknownImage"),
            None,
            False,
            id="terminal-no-timer",
        ),
    ],
)
def test_the_wait_follows_the_outcome(
    pass_: PassReport, timeout: timedelta | None, any_signal: bool
) -> None:
    """Ready waits the interval, Pending its hint, Transient its back-off, Terminal no timer."""
    wait = next_wait(pass_, SNAPSHOT, transient_streak=3)
    assert (wait.timeout, wait.wake_on_any_signal) == (timeout, any_signal)


def test_a_ready_wait_is_the_interval_lengthened_by_at_most_its_spread() -> None:
    """Never before the interval (one pass per interval at most), never later than a
    tenth past it; the UI's summary says the interval and the spread added."""
    interval = timedelta(seconds=120)
    waits = [
        next_wait(converged(), SNAPSHOT, transient_streak=0, spread=s) for s in (0, 0.5, 0.999)
    ]
    assert [w.timeout for w in waits] == [
        interval,
        interval * (1 + HEALTH_SPREAD / 2),
        timedelta(seconds=round(120 * (1 + HEALTH_SPREAD * 0.999), 1)),
    ]
    assert [w.summary for w in waits] == [
        "ready: re-check in 2m",
        "ready: re-check in 2m (+6s spread)",
        "ready: re-check in 2m (+12s spread)",
    ]


def test_a_fleet_ready_at_once_rechecks_spread_out() -> None:
    """100 instances Ready at the same moment: after a few intervals their re-checks
    are spread over several seconds, not one wave (the spreads are drawn at random)."""
    draws = random.Random(7)  # noqa: S311 (a jitter, not a secret)
    due = [0.0] * 100
    for _ in range(4):
        due = [
            d
            + next_wait(
                converged(), SNAPSHOT, transient_streak=0, spread=draws.random()
            ).timeout.total_seconds()  # type: ignore[union-attr]
            for d in due
        ]
    assert max(due) - min(due) > 120 * HEALTH_SPREAD
    assert min(due) >= 4 * 120


def test_a_step_that_just_changed_something_is_looked_at_again_at_once() -> None:
    """A hint of 0 means no timer, up to AT_ONCE_LIMIT passes in a row; then a second."""
    last = until("vm", Outcome.PENDING, "Created")
    changed = PassReport.model_validate(
        {
            **last.model_dump(),
            "results": [
                *last.results[:-1],
                last.results[-1].model_copy(update={"requeue_after_seconds": 0.0}),
            ],
        }
    )
    first = next_wait(changed, SNAPSHOT, transient_streak=0, at_once_streak=0)
    assert first.at_once and first.timeout == timedelta(0)
    assert "look again at once" in first.summary
    assert next_wait(
        changed, SNAPSHOT, transient_streak=0, at_once_streak=AT_ONCE_LIMIT - 1
    ).at_once
    spinning = next_wait(changed, SNAPSHOT, transient_streak=0, at_once_streak=AT_ONCE_LIMIT)
    assert not spinning.at_once and spinning.timeout == timedelta(seconds=1)
    # Terminal's "no timer" is a wait without end, not "at once".
    assert not next_wait(
        until("preflight", Outcome.TERMINAL, "X"), SNAPSHOT, transient_streak=0
    ).at_once


def test_a_repeated_pending_hint_doubles_up_to_the_cap() -> None:
    """The same Pending again and again is looked at after 2s, 4s, 8s, then every 10s; a
    hint already longer than the cap is kept as it is."""
    booting = until("power", Outcome.PENDING, "Starting")
    booting = booting.model_copy(
        update={
            "results": [
                *booting.results[:-1],
                booting.results[-1].model_copy(update={"requeue_after_seconds": 2.0}),
            ]
        }
    )
    waits = [
        next_wait(booting, SNAPSHOT, transient_streak=0, pending_streak=n).timeout
        for n in range(1, 7)
    ]
    assert [w.total_seconds() for w in waits if w is not None] == [2, 4, 8, 10, 10, 10]
    assert max(w for w in waits if w is not None) == PENDING_CAP
    slow = until("vm", Outcome.PENDING, "VMCreated")  # no hint: the 30s default
    assert next_wait(slow, SNAPSHOT, transient_streak=0, pending_streak=5).timeout == timedelta(
        seconds=30
    )
    assert (
        "look again in 10s"
        in next_wait(booting, SNAPSHOT, transient_streak=0, pending_streak=4).summary
    )


def test_the_pending_key_names_the_step_and_reason_of_a_pending_pass_only() -> None:
    """Only a Pending pass has a key; a Ready, Transient or Terminal pass has none."""
    assert pending_key(until("power", Outcome.PENDING, "Starting")) == ("power", "Starting")
    assert pending_key(converged()) is None
    assert pending_key(until("health", Outcome.TRANSIENT, "Unreachable")) is None
    assert pending_key(until("preflight", Outcome.TERMINAL, "X")) is None


def test_the_streak_counts_passes_pending_for_the_same_reason_in_a_row() -> None:
    """Pending Starting twice, then Restarting, then Ready: 1, 2, then 1 again, then none."""
    starting = until("power", Outcome.PENDING, "Starting")
    streak = PendingStreak().after(starting)
    assert streak.count == 1
    streak = streak.after(starting)
    assert streak.count == 2
    streak = streak.after(until("power", Outcome.PENDING, "Restarting"))
    assert (streak.key, streak.count) == (("power", "Restarting"), 1)
    assert PendingStreak().after(converged()).key is None


def test_a_transient_pass_waits_at_least_what_the_server_asked() -> None:
    """A 429's Retry-After lengthens the back-off; it never shortens it."""
    throttled = until("vm", Outcome.TRANSIENT, "Throttled")
    blocking = throttled.results[-1].model_copy(update={"requeue_after_seconds": 40.0})
    asked = throttled.model_copy(update={"results": [*throttled.results[:-1], blocking]})
    assert next_wait(asked, SNAPSHOT, transient_streak=1).timeout == timedelta(seconds=40)
    assert next_wait(asked, SNAPSHOT, transient_streak=8).timeout == backoff(8)


def test_a_held_action_waits_for_its_hint_at_most_one_health_interval() -> None:
    """A restart held for a window days away: the pass checked everything else, so the
    next one comes at the health check interval (or at the opening, if sooner)."""
    far = held_then().model_copy(deep=True)
    far.results[-1] = far.results[-1].model_copy(update={"requeue_after_seconds": 3 * 86400})
    assert next_wait(far, SNAPSHOT, transient_streak=0).timeout == timedelta(seconds=120)
    near = held_then().model_copy(deep=True)
    near.results[-1] = near.results[-1].model_copy(update={"requeue_after_seconds": 45})
    assert next_wait(near, SNAPSHOT, transient_streak=0).timeout == timedelta(seconds=45)


def test_a_settled_pass_waits_the_net_with_the_spread_the_interval_drew() -> None:
    """After a pass the worker settled, the workflow's own pass comes an hour later plus
    the spread its Ready wait drew, and never sooner than that wait."""
    ready = next_wait(converged(), SNAPSHOT, transient_streak=0, spread=0.5)
    hour = timedelta(hours=1)
    wait = rechecked(ready, timedelta(minutes=2), hour)
    assert wait.timeout == hour + timedelta(seconds=6)
    assert wait.summary == "ready: the worker re-checks every 2m; own pass in 1h (+6s spread)"
    assert wait.wake_on_any_signal
    long = rechecked(Wait(timedelta(hours=2), "", True), timedelta(hours=2), hour)
    assert long.timeout == timedelta(hours=2)
