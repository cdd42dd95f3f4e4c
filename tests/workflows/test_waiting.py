"""How the workflow waits after a pass, with plain data."""

from __future__ import annotations

from datetime import timedelta

import pytest

from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome
from tests.dbi.test_status import converged, until
from workflows.waiting import backoff, next_wait

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
