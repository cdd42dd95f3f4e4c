"""Maintenance windows: when an instance's disruptive actions may run (pure).

A window (``spec.maintenance.window``) opens at the times of a cron expression, in UTC,
written as five fields (``schedule``) or as days and a start (``days``, ``start``: the
same thing, friendlier), and stays open for ``duration``. A step about to restart the
VM for a planned change (a resize beyond what hot-plug takes, a repave) asks
``opens_at``: None means now is inside a window (or there is none), else the step
holds the action until then, a durable timer away (its requeue hint). An operator's
request (``dbi resize --force``, ``dbi.dev/restart-requested-at``) goes ahead anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cronsim import CronSim

from dbi.spec import DBInstanceSpec, MaintenanceWindow, duration_seconds

# cron's day-of-week numbers (0 is Sunday) of the days a window may name.
DAY_NUMBERS = {"Sun": 0, "Mon": 1, "Tue": 2, "Wed": 3, "Thu": 4, "Fri": 5, "Sat": 6}


def cron_of(window: MaintenanceWindow) -> str:
    """The cron expression (five fields, UTC) of the window's openings."""
    if window.schedule is not None:
        return window.schedule
    assert window.start is not None  # the spec's rules: start or schedule
    hour, minute = (int(part) for part in window.start.split(":"))
    days = "*"
    if window.days:
        days = ",".join(str(n) for n in sorted({DAY_NUMBERS[d.value] for d in window.days}))
    return f"{minute} {hour} * * {days}"


def opens_at(window: MaintenanceWindow | None, now: datetime) -> datetime | None:
    """When the next window opens; None when ``now`` is inside one (or there is none).

    A window opened at ``t`` is open over [t, t + duration): the first opening after
    ``now - duration`` is the one that counts. Second precision: openings are whole
    minutes, so a window is open from its first second."""
    if window is None:
        return None
    length = timedelta(seconds=duration_seconds(window.duration))
    since = (now - length).astimezone(UTC).replace(microsecond=0)
    # CronSim yields openings strictly after its start, at whole seconds.
    first = next(CronSim(cron_of(window), since - timedelta(seconds=1)))
    if first <= now < first + length:
        return None
    return first if first > now else next(CronSim(cron_of(window), now.astimezone(UTC)))


def describe(window: MaintenanceWindow) -> str:
    """The window in words for messages: ``Sat,Sun 02:00 UTC for 4h``."""
    if window.schedule is not None:
        return f"'{window.schedule}' (UTC) for {window.duration}"
    days = ",".join(d.value for d in window.days) if window.days else "daily"
    return f"{days} {window.start} UTC for {window.duration}"


def stamp(moment: datetime) -> str:
    """A moment as status and messages write it: RFC 3339, UTC, whole seconds."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Hold:
    """A planned restart waiting for the window: when it opens, and the window in words."""

    until: datetime
    seconds: float  # from the observation to the opening: the step's requeue hint
    window: str

    def message(self, what: str) -> str:
        """``what`` (a sentence's subject: "The restart for the new size") and the hold."""
        return (
            f"{what} waits for the maintenance window ({self.window}), which opens at "
            f"{stamp(self.until)}; dbi resize --force or dbi.dev/restart-requested-at "
            "applies it now."
        )


def hold_now(spec: DBInstanceSpec, *, forced: bool) -> Hold | None:
    """The hold on a planned restart of an instance with ``spec``, now (the clock read)."""
    window = spec.maintenance.window if spec.maintenance else None
    return hold(window, datetime.now(UTC), forced=forced)


def hold(window: MaintenanceWindow | None, now: datetime, *, forced: bool) -> Hold | None:
    """The hold on a planned restart observed at ``now``: None when it may run now (no
    window, inside one, or ``forced`` by an operator's request)."""
    if forced or window is None:
        return None
    until = opens_at(window, now)
    if until is None:
        return None
    return Hold(until=until, seconds=(until - now).total_seconds(), window=describe(window))
