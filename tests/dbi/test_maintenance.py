"""Maintenance windows' arithmetic (plain data): when a window is open, when it opens
next, and what a hold says. 2026-12-05 is a Saturday."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from dbi import maintenance
from dbi.maintenance import MaintenanceWindow
from dbi.spec import DBInstanceSpec

WEEKEND = {"days": ["Sat", "Sun"], "start": "02:00", "duration": "4h"}
NIGHTLY_ACROSS_MIDNIGHT = {"start": "23:00", "duration": "4h"}
CRON_SATURDAY = {"schedule": "30 1 * * 6", "duration": "90m"}
LONGER_THAN_ITS_PERIOD = {"schedule": "0 * * * *", "duration": "2h"}  # always open


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def window(fields: dict[str, Any]) -> MaintenanceWindow:
    return MaintenanceWindow.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "now", "opens"),
    [
        pytest.param(WEEKEND, "2026-12-01T22:00:00", "2026-12-05T02:00:00", id="tuesday-waits"),
        pytest.param(WEEKEND, "2026-12-05T01:59:59", "2026-12-05T02:00:00", id="second-before"),
        pytest.param(WEEKEND, "2026-12-05T02:00:00", None, id="opening-second"),
        pytest.param(WEEKEND, "2026-12-05T05:59:59.900", None, id="last-moment"),
        pytest.param(WEEKEND, "2026-12-05T06:00:00", "2026-12-06T02:00:00", id="closed-at-end"),
        pytest.param(WEEKEND, "2026-12-06T03:00:00", None, id="sunday-open"),
        pytest.param(WEEKEND, "2026-12-06T06:30:00", "2026-12-12T02:00:00", id="next-weekend"),
        pytest.param(NIGHTLY_ACROSS_MIDNIGHT, "2026-12-02T01:00:00", None, id="open-past-midnight"),
        pytest.param(
            NIGHTLY_ACROSS_MIDNIGHT,
            "2026-12-02T03:00:00",
            "2026-12-02T23:00:00",
            id="closed-after-midnight-window",
        ),
        pytest.param(CRON_SATURDAY, "2026-12-05T01:29:00", "2026-12-05T01:30:00", id="cron"),
        pytest.param(CRON_SATURDAY, "2026-12-05T02:59:59", None, id="cron-open"),
        pytest.param(CRON_SATURDAY, "2026-12-05T03:00:00", "2026-12-12T01:30:00", id="cron-end"),
        pytest.param(LONGER_THAN_ITS_PERIOD, "2026-12-01T22:17:00", None, id="overlapping"),
    ],
)
def test_when_a_window_opens(fields: dict[str, Any], now: str, opens: str | None) -> None:
    expected = at(opens) if opens else None
    assert maintenance.opens_at(window(fields), at(now)) == expected


def test_days_and_start_read_as_cron() -> None:
    assert maintenance.cron_of(window(WEEKEND)) == "0 2 * * 0,6"
    assert maintenance.cron_of(window({"start": "07:05", "duration": "1h"})) == "5 7 * * *"


def test_no_window_and_a_forced_restart_are_not_held() -> None:
    now = at("2026-12-01T22:00:00")
    assert maintenance.hold(None, now, forced=False) is None
    assert maintenance.hold(window(WEEKEND), now, forced=True) is None
    assert maintenance.hold(window(WEEKEND), at("2026-12-05T03:00:00"), forced=False) is None


def test_a_hold_says_until_when_and_how_to_override() -> None:
    held = maintenance.hold(window(WEEKEND), at("2026-12-04T02:00:00"), forced=False)
    assert held is not None
    assert held.seconds == 24 * 3600
    message = held.message("The restart for the new size")
    assert "2026-12-05T02:00:00Z" in message and "Sat,Sun 02:00 UTC for 4h" in message
    assert "dbi resize --force" in message and "dbi.dev/restart-requested-at" in message


@pytest.mark.parametrize(
    ("allowed", "forced", "held", "when"),
    [
        (True, False, False, maintenance.Restart.NOW),
        (True, False, True, maintenance.Restart.AT_WINDOW),
        (False, False, False, maintenance.Restart.WHEN_FORCED),
        (False, False, True, maintenance.Restart.WHEN_FORCED),
        (False, True, False, maintenance.Restart.NOW),
        (True, True, True, maintenance.Restart.NOW),
    ],
)
def test_a_planned_restart_runs_now_at_the_window_or_when_forced(
    allowed: bool, forced: bool, held: bool, when: maintenance.Restart
) -> None:
    hold = maintenance.hold(window(WEEKEND), at("2026-12-04T02:00:00"), forced=False)
    assert hold is not None
    got = maintenance.planned_restart(allowed=allowed, forced=forced, hold=hold if held else None)
    assert got is when


@pytest.mark.parametrize("schedule", ["0 2 31 4 *", "61 2 * * *", "0 2 * * MONDAY"])
def test_a_cron_that_cannot_fire_is_refused_by_the_model(schedule: str) -> None:
    """What the CRD's pattern lets through but cron cannot read (April 31st, minute 61):
    the model refuses it, naming the field."""
    spec = {
        "version": 18,
        "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
        "maintenance": {"window": {"schedule": schedule, "duration": "1h"}},
    }
    with pytest.raises(ValidationError) as raised:
        DBInstanceSpec.model_validate(spec)
    assert raised.value.errors()[0]["loc"] == ("maintenance", "window", "schedule")
