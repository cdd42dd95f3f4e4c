"""Decide how a DBInstance workflow waits after a pass: pure, deterministic, tested with data.

Durable timers replace RequeueAfter: Pending waits for the step's requeue hint (at most
healthCheckInterval for a held action, whose pass checked the rest; none
at all for a hint of 0: the step has just changed something, and the next pass looks;
doubled for each pass in a row that found the same step waiting for the same reason,
up to PENDING_CAP, since the watcher's wake, not the timer, is what brings a pass
promptly once the world changes), Ready for healthCheckInterval (lengthened by up to
HEALTH_SPREAD of it, at random: a fleet that became Ready together does not re-check
together), Transient backs off
exponentially up to a cap, and Terminal waits with no timer at all, until a new
generation or a ``retry`` signal. A ``wake`` signal ends every wait but Terminal's early.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from dbi.messages import AWAIT_NET, RECHECK_NET
from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome

DEFAULT_PENDING = timedelta(seconds=30)
# A step that has just changed something asks to be looked at again at once (a hint of
# 0); so many passes in a row may do so, then the next waits a second (a change that
# does not stick, such as a fight with another writer, must not spin).
AT_ONCE_LIMIT = 5
AT_ONCE_FALLBACK = timedelta(seconds=1)
# A transition still under way (a VM booting) is looked at again after the step's hint,
# then after twice that, and so on up to this: a fleet of booting VMs must not spend
# its machine on passes that find the same thing, while a change no event announces
# (PostgreSQL inside a running VM starting to answer) is still seen within this.
PENDING_CAP = timedelta(seconds=10)
# A Ready instance waits its healthCheckInterval plus up to this fraction of it, drawn
# for each wait: the re-checks of instances that became Ready at the same moment drift
# apart instead of arriving as one wave (client-go's JitterUntil does the same for
# periodic work). Never shorter than the interval: one pass per interval at most.
HEALTH_SPREAD = 0.1
BACKOFF_BASE = timedelta(seconds=5)
BACKOFF_CAP = timedelta(minutes=5)


@dataclass(frozen=True)
class Wait:
    """How long to wait (None: until woken by a new generation or retry), and why."""

    timeout: timedelta | None
    summary: str
    wake_on_any_signal: bool

    @property
    def at_once(self) -> bool:
        """No wait at all: the next pass starts now."""
        return self.timeout is not None and not self.timeout


def backoff(streak: int) -> timedelta:
    """Return the back-off after ``streak`` Transient passes in a row (1, 2, ...)."""
    exponent = min(max(streak - 1, 0), 16)
    return min(BACKOFF_BASE * (1 << exponent), BACKOFF_CAP)


def next_wait(
    report: PassReport,
    snapshot: InstanceSnapshot,
    *,
    transient_streak: int,
    at_once_streak: int = 0,
    pending_streak: int = 1,
    spread: float = 0.0,
) -> Wait:
    """Return how the workflow waits after ``report``; ``at_once_streak`` is how many
    passes in a row just before it were followed by no wait at all, ``pending_streak``
    how many in a row, this one included, found the same step Pending for the same
    reason (``PendingStreak``); ``spread``, in [0, 1), says how much of HEALTH_SPREAD a
    Ready wait adds (the caller draws it at random)."""
    blocking = report.blocking
    if blocking is None:
        interval = timedelta(seconds=snapshot.health_check_interval_seconds)
        extra = timedelta(seconds=round(interval.total_seconds() * HEALTH_SPREAD * spread, 1))
        summary = f"ready: re-check in {_human(interval)}"
        if extra >= timedelta(seconds=1):
            summary += f" (+{int(extra.total_seconds())}s spread)"
        return Wait(interval + extra, summary, wake_on_any_signal=True)
    if blocking.outcome is Outcome.TERMINAL:
        return Wait(
            None,
            f"stalled at {blocking.step} ({blocking.reason}): waiting for a spec change or retry",
            wake_on_any_signal=False,
        )
    if blocking.outcome is Outcome.TRANSIENT:
        delay = backoff(transient_streak)
        if blocking.requeue_after_seconds:  # the server said when (a 429's Retry-After)
            delay = max(delay, timedelta(seconds=blocking.requeue_after_seconds))
        return Wait(
            delay,
            f"{blocking.step} failed ({blocking.reason}): back off {_human(delay)}",
            wake_on_any_signal=True,
        )
    hint = blocking.requeue_after_seconds
    delay = timedelta(seconds=hint) if hint is not None else DEFAULT_PENDING
    if not delay and at_once_streak >= AT_ONCE_LIMIT:
        delay = AT_ONCE_FALLBACK
    if delay and pending_streak > 1:
        delay = min(delay * (1 << min(pending_streak - 1, 16)), max(delay, PENDING_CAP))
    if blocking.held:  # the rest of the instance is still checked at its interval
        delay = min(delay, timedelta(seconds=snapshot.health_check_interval_seconds))
    if not delay:
        return Wait(
            delay,
            f"{blocking.step} changed something ({blocking.reason}): look again at once",
            wake_on_any_signal=True,
        )
    return Wait(
        delay,
        f"{blocking.step} pending ({blocking.reason}): look again in {_human(delay)}",
        wake_on_any_signal=True,
    )


def rechecked(wait: Wait, interval: timedelta, net: timedelta) -> Wait:
    """The wait after a Ready pass the worker settled (``activities.worker.rechecks``): the
    worker re-checks the instance every ``interval`` and wakes the workflow when a
    re-check finds a change, so the workflow's own next pass is a safety net, ``net``
    later, with the spread ``wait`` drew (never sooner than ``wait``)."""
    spread = max((wait.timeout or interval) - interval, timedelta(0))
    own = max(net, interval)
    summary = f"ready: the worker re-checks every {_human(interval)}; own pass in {_human(own)}"
    if spread >= timedelta(seconds=1):
        summary += f" (+{int(spread.total_seconds())}s spread)"
    return Wait(own + spread, summary, wake_on_any_signal=True)


def awaited(wait: Wait, net: timedelta) -> Wait:
    """The wait after a Pending pass the worker took on (``activities.worker.rechecks``,
    ``awaits``: a transition the watcher announces): the worker makes the step's
    fallback look after ``wait`` and as often, waking the workflow when a look finds a
    change, and the watcher's wake brings the pass once the transition ends; the
    workflow's own pass is a net, ``net`` later (never sooner than ``wait``)."""
    every = wait.timeout or timedelta(0)
    own = max(net, every)
    head = wait.summary.split(": look again", 1)[0]
    summary = f"{head}: the worker looks again every {_human(every)}; own pass in {_human(own)}"
    return Wait(own, summary, wake_on_any_signal=True)


def pending_key(report: PassReport) -> tuple[str, str] | None:
    """What a Pending pass waits for (its step and reason); None for any other pass."""
    blocking = report.blocking
    if blocking is None or blocking.outcome is not Outcome.PENDING:
        return None
    return (blocking.step, blocking.reason)


@dataclass(frozen=True)
class PendingStreak:
    """How many passes in a row, the last one included, were Pending for ``key``."""

    key: tuple[str, str] | None = None
    count: int = 0

    def after(self, report: PassReport) -> PendingStreak:
        """Return the streak once ``report`` is the latest pass."""
        key = pending_key(report)
        return PendingStreak(key, self.count + 1 if key is not None and key == self.key else 1)


def _human(delay: timedelta) -> str:
    seconds = int(delay.total_seconds())
    if seconds % 3600 == 0:
        return f"{seconds // 3600}h"
    if seconds % 60 == 0:
        return f"{seconds // 60}m"
    return f"{seconds}s"


@dataclass(frozen=True)
class Streaks:
    """What the next wait depends on besides the pass itself, kept from pass to pass:
    Transient passes in a row, passes in a row followed by no wait, and the Pending
    streak. ``after`` is the one place they change."""

    transient: int = 0
    at_once: int = 0
    pending: PendingStreak = PendingStreak()

    def after(
        self, report: PassReport, snapshot: InstanceSnapshot, *, spread: float, settled: bool
    ) -> tuple[Wait, Streaks]:
        """Return how to wait after ``report``, and the streaks once it is the latest;
        ``settled``: the worker re-checks the instance (``rechecked``), or makes the
        fallback look of a Pending one (``awaited``)."""
        blocking = report.blocking
        transient = blocking is not None and blocking.outcome is Outcome.TRANSIENT
        streaks = replace(
            self,
            transient=self.transient + 1 if transient else 0,
            pending=self.pending.after(report),
        )
        wait = next_wait(
            report,
            snapshot,
            transient_streak=streaks.transient,
            at_once_streak=streaks.at_once,
            pending_streak=streaks.pending.count,
            spread=spread,
        )
        if settled and blocking is None:
            interval = timedelta(seconds=snapshot.health_check_interval_seconds)
            wait = rechecked(wait, interval, RECHECK_NET)
        elif settled and blocking is not None and blocking.outcome is Outcome.PENDING:
            wait = awaited(wait, AWAIT_NET)
        return wait, replace(streaks, at_once=streaks.at_once + 1 if wait.at_once else 0)
