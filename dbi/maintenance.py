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
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

from cronsim import CronSim, CronSimError
from pydantic import AfterValidator, ConfigDict, Field, model_validator

from dbi.fields import CRON_FIELD, DURATION, QUANTITY_MAX, Section, duration_seconds, rules

if TYPE_CHECKING:
    from dbi.spec import DBInstanceSpec

# A window's openings: five cron fields (minute hour day-of-month month day-of-week, UTC).
_WINDOW_CRON = rf"^{CRON_FIELD}( {CRON_FIELD}){{4}}$"
WINDOW_MAX_HOURS = 168


def _window_cron(value: str | None) -> str | None:
    """Five cron fields that fire (cronsim reads them as the worker will)."""
    if value is None:
        return None
    try:
        next(CronSim(value, datetime(2000, 1, 1, tzinfo=UTC)))
    except (CronSimError, StopIteration) as e:
        raise ValueError(f"{value!r} is not a cron expression: {e}") from None
    return value


def _window_length(value: str) -> str:
    if not 60 <= duration_seconds(value) <= WINDOW_MAX_HOURS * 3600:
        raise ValueError(f"must be between 1m and {WINDOW_MAX_HOURS}h")
    return value


class Weekday(StrEnum):
    MON = "Mon"
    TUE = "Tue"
    WED = "Wed"
    THU = "Thu"
    FRI = "Fri"
    SAT = "Sat"
    SUN = "Sun"


class MaintenanceWindow(Section):
    """When the orchestrator may restart the VM for a planned change, in UTC: from
    ``start`` on ``days`` (or at the times of ``schedule``) for ``duration``."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            (
                "has(self.start) != has(self.schedule)",
                "set exactly one of start (with days) or schedule",
            ),
            ("!has(self.days) || has(self.start)", "days go with start"),
        )
    )

    days: list[Weekday] | None = Field(
        default=None,
        min_length=1,
        max_length=7,
        description="The days it opens on (Mon to Sun, UTC). Unset: every day.",
    )
    start: str | None = Field(
        default=None,
        max_length=5,
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="When it opens, as HH:MM in UTC, such as 02:00.",
    )
    schedule: Annotated[str | None, AfterValidator(_window_cron)] = Field(
        default=None,
        max_length=QUANTITY_MAX * 2,
        pattern=_WINDOW_CRON,
        description="When it opens, as five cron fields in UTC (minute hour day-of-month "
        "month day-of-week), such as '0 2 * * 6' (Saturdays at 02:00); instead of start "
        "and days.",
    )
    duration: Annotated[str, AfterValidator(_window_length)] = Field(
        max_length=QUANTITY_MAX,
        pattern=DURATION.pattern,
        description=f"How long it stays open, between 1m and {WINDOW_MAX_HOURS}h, such as 4h.",
        json_schema_extra=rules(
            (
                "duration(self) >= duration('1m') && "
                f"duration(self) <= duration('{WINDOW_MAX_HOURS}h')",
                f"must be between 1m and {WINDOW_MAX_HOURS}h",
            )
        ),
    )

    @model_validator(mode="after")
    def _one_form(self) -> MaintenanceWindow:
        if (self.start is None) == (self.schedule is None):
            raise ValueError("set exactly one of start (with days) or schedule")
        if self.days is not None and self.start is None:
            raise ValueError("days go with start")
        return self


class Maintenance(Section):
    """When planned disruption may happen."""

    window: MaintenanceWindow | None = Field(
        default=None,
        description="A restart a resize or a repave needs waits for this window (a "
        "durable timer); dbi resize --force and dbi.dev/restart-requested-at apply it at "
        "once. Unset: at once.",
    )


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


class Restart(StrEnum):
    """When a planned restart runs: now, at the window's opening, or when forced."""

    NOW = "now"
    AT_WINDOW = "at-window"
    WHEN_FORCED = "when-forced"


def planned_restart(*, allowed: bool, forced: bool, hold: Hold | None) -> Restart:
    """When a planned restart runs (pure): ``allowed`` by resizePolicy Restart, held by a
    closed window (``hold``), and run at once when ``forced`` by an operator's request
    (``dbi resize --force``, ``dbi.dev/restart-requested-at``)."""
    if forced or (allowed and hold is None):
        return Restart.NOW
    return Restart.AT_WINDOW if allowed else Restart.WHEN_FORCED


def hold(window: MaintenanceWindow | None, now: datetime, *, forced: bool) -> Hold | None:
    """The hold on a planned restart observed at ``now``: None when it may run now (no
    window, inside one, or ``forced`` by an operator's request)."""
    if forced or window is None:
        return None
    until = opens_at(window, now)
    if until is None:
        return None
    return Hold(until=until, seconds=(until - now).total_seconds(), window=describe(window))
