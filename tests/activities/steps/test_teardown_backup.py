"""The teardown's backup step: the schedule first, then the final backup (pure)."""

from __future__ import annotations

import pytest

from activities.infra.schedules import Run
from activities.steps.teardown_backup import Action, Observation, Reason, decide
from dbi.backups import BackupPhase, BackupResult
from dbi.steps import Outcome

DONE = BackupResult(backup="db-20261201-120000", phase=BackupPhase.COMPLETED)
FAILED = BackupResult(
    backup="db-20261201-120000", phase=BackupPhase.FAILED, reason="InstanceNotRunning"
)
GONE_NAMESPACE = BackupResult(backup=None, phase=None, reason="NamespaceTerminating")


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(
            Observation(scheduled=True, final_asked=True),
            Outcome.PENDING,
            Reason.DELETED,
            Action.DELETE_SCHEDULE,
            id="schedule-first",
        ),
        pytest.param(
            Observation(scheduled=False),
            Outcome.SATISFIED,
            Reason.REMOVED,
            None,
            id="no-final",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True),
            Outcome.PENDING,
            Reason.FINAL_STARTED,
            Action.START_FINAL,
            id="final-started",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True, final=Run(running=True)),
            Outcome.PENDING,
            Reason.FINAL_RUNNING,
            None,
            id="the-disks-wait",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True, final=Run(False, DONE)),
            Outcome.SATISFIED,
            Reason.FINAL_TAKEN,
            None,
            id="taken-then-on",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True, final=Run(False, FAILED)),
            Outcome.TERMINAL,
            Reason.FINAL_FAILED,
            None,
            id="failed-holds-the-disks",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True, final=Run(False, None)),
            Outcome.TERMINAL,
            Reason.FINAL_FAILED,
            None,
            id="ended-workflow-holds-the-disks",
        ),
        pytest.param(
            Observation(scheduled=False, final_asked=True, final=Run(False, GONE_NAMESPACE)),
            Outcome.SATISFIED,
            Reason.FINAL_SKIPPED,
            None,
            id="namespace-deleted",
        ),
    ],
)
def test_the_disks_go_only_after_the_final_backup_asked_for(
    obs: Observation, outcome: Outcome, reason: Reason, action: Action | None
) -> None:
    """No VM or disk is deleted until the final backup Completed, unless none was asked."""
    decision = decide(obs)
    assert (decision.result.outcome, decision.result.reason, decision.action) == (
        outcome,
        reason,
        action,
    )
