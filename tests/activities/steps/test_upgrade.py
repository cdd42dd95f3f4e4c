"""upgrade's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from activities.infra.schedules import Upgrade
from activities.steps import upgrade
from dbi import maintenance
from dbi.steps import Outcome
from dbi.upgrades import FINISH_FAILED, UpgradeResult

HELD = maintenance.Hold(
    until=datetime(2026, 12, 5, 2, tzinfo=UTC), seconds=600.0, window="Sat 02:00 UTC for 4h"
)
DUE = upgrade.Observation(target=17, data=16, workflow_id="dbupgrade/ns/db-u-to-17")
FAILED = UpgradeResult(ok=False, reason="UpgradeCheckFailed", message="The check failed: x.")


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(
            replace(DUE, data=17), Outcome.SATISFIED, "VersionCurrent", None, id="current"
        ),
        pytest.param(
            replace(DUE, data=None), Outcome.SATISFIED, "VersionCurrent", None, id="new-instance"
        ),
        pytest.param(DUE, Outcome.PENDING, "UpgradeStarted", upgrade.Action.START, id="start"),
        pytest.param(
            replace(DUE, data=14),
            Outcome.PENDING,
            "UpgradeStarted",
            upgrade.Action.START,
            id="several-majors-at-once",
        ),
        pytest.param(
            replace(DUE, hold=HELD), Outcome.PENDING, "MaintenanceWindow", None, id="window"
        ),
        pytest.param(
            replace(DUE, stopped=True),
            Outcome.PENDING,
            "UpgradeWaitsForStart",
            None,
            id="stopped",
        ),
        pytest.param(
            replace(DUE, run=Upgrade(running=True)),
            Outcome.PENDING,
            "Upgrading",
            None,
            id="running",
        ),
        pytest.param(
            replace(DUE, run=Upgrade(running=True), hold=HELD),
            Outcome.PENDING,
            "Upgrading",
            None,
            id="a-running-upgrade-is-not-held",
        ),
        pytest.param(
            replace(DUE, run=Upgrade(running=False, result=FAILED)),
            Outcome.TERMINAL,
            "UpgradeCheckFailed",
            None,
            id="failed-rolled-back",
        ),
        pytest.param(
            replace(DUE, run=Upgrade(running=False)),
            Outcome.TERMINAL,
            "UpgradeFailed",
            None,
            id="workflow-ended-without-result",
        ),
        pytest.param(
            replace(
                DUE,
                run=Upgrade(
                    running=False, result=UpgradeResult(ok=True, reason="Upgraded", message="")
                ),
            ),
            Outcome.PENDING,
            "Upgrading",
            None,
            id="finished-record-not-seen-yet",
        ),
        pytest.param(
            replace(DUE, data=18), Outcome.TERMINAL, "DataNewerThanVersion", None, id="data-newer"
        ),
        pytest.param(
            replace(DUE, one_disk=True), Outcome.TERMINAL, "OneDiskLayout", None, id="one-disk"
        ),
        pytest.param(
            replace(DUE, can_start=False),
            Outcome.TERMINAL,
            "WorkflowsUnavailable",
            None,
            id="no-client",
        ),
    ],
)
def test_decide(
    obs: upgrade.Observation, outcome: Outcome, reason: str, action: upgrade.Action | None
) -> None:
    decision = upgrade.decide(obs)
    assert (decision.result.outcome, decision.result.reason) == (outcome, reason)
    assert decision.action == action


def test_a_failed_upgrade_says_the_old_data_runs_and_how_to_try_again() -> None:
    message = upgrade.decide(replace(DUE, run=Upgrade(running=False, result=FAILED))).result.message
    assert "The check failed: x." in message and "old data runs as before" in message
    assert "dbi.dev/reconcile-requested-at" in message


def test_nothing_an_upgrade_waits_on_lets_the_pass_go_on() -> None:
    """While an upgrade is due, later steps (repave: the new major's root disk) must not
    run: no result of this step is held."""
    for obs in (DUE, replace(DUE, hold=HELD), replace(DUE, stopped=True)):
        assert not upgrade.decide(obs).result.held


def test_an_upgrade_that_could_not_finish_does_not_claim_a_rollback() -> None:
    unfinished = UpgradeResult(ok=False, reason=FINISH_FAILED, message="finishing failed.")
    decided = upgrade.decide(replace(DUE, run=Upgrade(running=False, result=unfinished)))
    assert decided.result.reason == FINISH_FAILED
    assert "rolled back" not in decided.result.message
    assert "finishing failed." in decided.result.message


def test_a_workflow_that_ended_without_a_result_is_not_said_to_have_rolled_back() -> None:
    """A failed or terminated upgrade workflow has no result: the step does not claim
    the old data runs, and says where to look and how to try again."""
    decided = upgrade.decide(replace(DUE, run=Upgrade(running=False, result=None)))
    assert decided.result.outcome is Outcome.TERMINAL
    assert "rolled back" not in decided.result.message
    assert "Temporal UI" in decided.result.message
    assert "dbi.dev/reconcile-requested-at" in decided.result.message
