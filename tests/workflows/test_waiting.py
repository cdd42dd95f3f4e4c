"""How the workflow waits after a pass, with plain data."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome
from tests.dbi.test_status import converged, until
from workflows.waiting import AT_ONCE_LIMIT, backoff, next_wait

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
