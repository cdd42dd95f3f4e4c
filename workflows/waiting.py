"""Decide how a DBInstance workflow waits after a pass: pure, deterministic, tested with data.

Durable timers replace RequeueAfter: Pending waits for the step's requeue hint,
Ready for healthCheckInterval, Transient backs off exponentially up to a cap, and
Terminal waits with no timer at all, until a new generation or a ``retry`` signal.
A ``wake`` signal ends every wait but Terminal's early.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome

DEFAULT_PENDING = timedelta(seconds=30)
BACKOFF_BASE = timedelta(seconds=5)
BACKOFF_CAP = timedelta(minutes=5)


@dataclass(frozen=True)
class Wait:
    """How long to wait (None: until woken by a new generation or retry), and why."""

    timeout: timedelta | None
    summary: str
    wake_on_any_signal: bool


def backoff(streak: int) -> timedelta:
    """Return the back-off after ``streak`` Transient passes in a row (1, 2, ...)."""
    exponent = min(max(streak - 1, 0), 16)
    return min(BACKOFF_BASE * (1 << exponent), BACKOFF_CAP)


def next_wait(report: PassReport, snapshot: InstanceSnapshot, *, transient_streak: int) -> Wait:
    """Return how the workflow waits after ``report``."""
    blocking = report.blocking
    if blocking is None:
        interval = timedelta(seconds=snapshot.health_check_interval_seconds)
        return Wait(interval, f"ready: re-check in {_human(interval)}", wake_on_any_signal=True)
    if blocking.outcome is Outcome.TERMINAL:
        return Wait(
            None,
            f"stalled at {blocking.step} ({blocking.reason}): waiting for a spec change or retry",
            wake_on_any_signal=False,
        )
    if blocking.outcome is Outcome.TRANSIENT:
        delay = backoff(transient_streak)
        return Wait(
            delay,
            f"{blocking.step} failed ({blocking.reason}): back off {_human(delay)}",
            wake_on_any_signal=True,
        )
    hint = blocking.requeue_after_seconds
    delay = timedelta(seconds=hint) if hint is not None else DEFAULT_PENDING
    return Wait(
        delay,
        f"{blocking.step} pending ({blocking.reason}): look again in {_human(delay)}",
        wake_on_any_signal=True,
    )


def _human(delay: timedelta) -> str:
    seconds = int(delay.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"
