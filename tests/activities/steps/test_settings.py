"""settings' decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from activities.steps import settings
from dbi import maintenance
from dbi.spec import ResizePolicy
from dbi.steps import Outcome
from tests.dbi.pg_settings import SHARED_BUFFERS, WORK_MEM

HELD = maintenance.Hold(
    until=datetime(2026, 12, 5, 2, tzinfo=UTC), seconds=3600.0, window="Sat 02:00 UTC for 4h"
)
DECLARED = {"work_mem": "64MB", "shared_buffers": "256MB"}
APPLIED = settings.Observation(
    declared=DECLARED,
    address="10.0.0.7",
    reachable=True,
    settings={"work_mem": WORK_MEM, "shared_buffers": SHARED_BUFFERS},
    written=DECLARED,
    vmi_uid="vmi-1",
)
RESTART = replace(APPLIED, pending_restart=("shared_buffers",))


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(APPLIED, Outcome.SATISFIED, "SettingsApplied", None, id="applied"),
        pytest.param(
            settings.Observation(looked=False),
            Outcome.SATISFIED,
            "SettingsApplied",
            None,
            id="nothing-declared",
        ),
        pytest.param(
            settings.Observation(stopped=True), Outcome.SATISFIED, "Stopped", None, id="stopped"
        ),
        pytest.param(
            replace(APPLIED, address=None), Outcome.PENDING, "NoAddress", None, id="no-address"
        ),
        pytest.param(
            replace(APPLIED, reachable=False), Outcome.PENDING, "Booting", None, id="booting"
        ),
        pytest.param(
            replace(APPLIED, written={}),
            Outcome.PENDING,
            "SettingsWritten",
            settings.Action.WRITE,
            id="write",
        ),
        pytest.param(
            replace(APPLIED, written={**DECLARED, "work_mem": "4MB"}),
            Outcome.PENDING,
            "SettingsWritten",
            settings.Action.WRITE,
            id="changed",
        ),
        pytest.param(
            replace(APPLIED, written={**DECLARED, "jit": "off"}),
            Outcome.PENDING,
            "SettingsWritten",
            settings.Action.WRITE,
            id="undeclared-reset",
        ),
        pytest.param(
            replace(APPLIED, not_reloaded=("work_mem",)),
            Outcome.PENDING,
            "Reloading",
            settings.Action.RELOAD,
            id="reload",
        ),
        pytest.param(
            RESTART, Outcome.PENDING, "Restarting", settings.Action.RESTART, id="restart-now"
        ),
        pytest.param(
            replace(RESTART, hold=HELD),
            Outcome.PENDING,
            "MaintenanceWindow",
            None,
            id="restart-waits-for-window",
        ),
        pytest.param(
            replace(RESTART, hold=HELD, allow_restart=True),
            Outcome.PENDING,
            "Restarting",
            settings.Action.RESTART,
            id="forced",
        ),
        pytest.param(
            replace(RESTART, policy=ResizePolicy.DEFERRED),
            Outcome.PENDING,
            "RestartRequired",
            None,
            id="deferred",
        ),
        pytest.param(
            replace(APPLIED, declared={**DECLARED, "work_mem": "4XB"}),
            Outcome.TERMINAL,
            "InvalidParameter",
            None,
            id="invalid-value",
        ),
        pytest.param(
            replace(APPLIED, declared={"wrok_mem": "4MB"}, written={}),
            Outcome.TERMINAL,
            "InvalidParameter",
            None,
            id="unknown-name-nothing-written",
        ),
    ],
)
def test_decide(
    obs: settings.Observation, outcome: Outcome, reason: str, action: settings.Action | None
) -> None:
    decision = settings.decide(obs)
    assert decision.result.outcome is outcome
    assert decision.result.reason == reason
    assert decision.action is action


def test_a_waiting_restart_lets_the_pass_go_on_and_status_names_it() -> None:
    """A restart held for the window is held (the steps after still run) and the facts
    list what waits for it."""
    result = settings.decide(replace(RESTART, hold=HELD)).result
    assert result.held
    assert result.facts.pending_restart == ("shared_buffers",)
    assert "2026-12-05T02:00:00Z" in result.message


def test_every_invalid_parameter_is_named() -> None:
    obs = replace(APPLIED, declared={"work_mem": "4XB", "wrok_mem": "1"})
    message = settings.decide(obs).result.message
    assert "spec.postgresql.parameters.work_mem" in message
    assert "spec.postgresql.parameters.wrok_mem" in message


def test_statements_write_what_differs_and_reset_what_is_no_longer_declared() -> None:
    written = {"work_mem": "4MB", "jit": "off", "shared_buffers": "256MB"}
    declared = {"work_mem": "64MB", "shared_buffers": "256MB", "auto_explain.log_analyze": "on"}
    made = [(name, str(s.as_string(None))) for name, s in settings.statements(declared, written)]
    assert made == [
        ("jit", 'ALTER SYSTEM RESET "jit"'),
        ("auto_explain.log_analyze", 'ALTER SYSTEM SET "auto_explain"."log_analyze" = \'on\''),
        ("work_mem", "ALTER SYSTEM SET \"work_mem\" = '64MB'"),
    ]


def test_a_value_is_a_literal_never_sql() -> None:
    declared = {"application_name": "x'; DROP TABLE t; --"}
    [(_, statement)] = settings.statements(declared, {})
    assert statement.as_string(None).endswith("= 'x''; DROP TABLE t; --'")
