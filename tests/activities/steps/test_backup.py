"""The backup step's decisions, from observed schedules (pure)."""

from __future__ import annotations

import pytest

from activities.infra.schedules import Seen, Wanted
from activities.steps.backup import Action, Observation, Reason, decide
from dbi.steps import Outcome

DAILY = Wanted(schedule="@daily", paused=False)
WEEKLY_TEST = Wanted(schedule="@weekly", paused=False, restore_test=True)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(
            Observation(wanted=None, seen=None),
            Outcome.SATISFIED,
            Reason.NOT_ASKED,
            None,
            id="none-asked-none-there",
        ),
        pytest.param(
            Observation(wanted=None, seen=Seen("@daily", False)),
            Outcome.PENDING,
            Reason.DELETED,
            Action.DELETE,
            id="unset-deletes",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=None),
            Outcome.PENDING,
            Reason.CREATED,
            Action.CREATE,
            id="asked-creates",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=Seen("@hourly", False)),
            Outcome.PENDING,
            Reason.UPDATED,
            Action.UPDATE,
            id="changed-updates",
        ),
        pytest.param(
            Observation(wanted=Wanted("@daily", True), seen=Seen("@daily", False)),
            Outcome.PENDING,
            Reason.UPDATED,
            Action.UPDATE,
            id="suspended-pauses",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=Seen(None, False)),
            Outcome.PENDING,
            Reason.UPDATED,
            Action.UPDATE,
            id="a-schedule-not-written-by-dbi",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=Seen("@daily", False)),
            Outcome.SATISFIED,
            Reason.SCHEDULED,
            None,
            id="as-asked",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=Seen("@daily", False), test_wanted=WEEKLY_TEST),
            Outcome.PENDING,
            Reason.CREATED,
            Action.CREATE_TEST,
            id="a-restore-test-schedule-is-made-after-the-backup-one",
        ),
        pytest.param(
            Observation(wanted=None, seen=None, test_wanted=None, test_seen=Seen("@weekly", False)),
            Outcome.PENDING,
            Reason.DELETED,
            Action.DELETE,
            id="without-spec-backup-the-restore-test-schedule-goes-too",
        ),
        pytest.param(
            Observation(
                wanted=DAILY,
                seen=Seen("@daily", False),
                test_wanted=WEEKLY_TEST,
                test_seen=Seen("@daily", False),
            ),
            Outcome.PENDING,
            Reason.UPDATED,
            Action.UPDATE_TEST,
            id="a-changed-restore-test-schedule-is-updated",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=Seen("@daily", False), test_seen=Seen("@weekly", False)),
            Outcome.PENDING,
            Reason.DELETED,
            Action.DELETE_TEST,
            id="restore-tests-unset-their-schedule-goes",
        ),
        pytest.param(
            Observation(
                wanted=DAILY,
                seen=Seen("@daily", False),
                test_wanted=WEEKLY_TEST,
                test_seen=Seen("@weekly", False),
            ),
            Outcome.SATISFIED,
            Reason.SCHEDULED,
            None,
            id="both-as-asked",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=None, store_problem="DBI_BACKUP_STORE is not set"),
            Outcome.TERMINAL,
            Reason.NO_STORE,
            None,
            id="no-store",
        ),
        pytest.param(
            Observation(wanted=None, seen=None, requested="2026-12-01T12:00:00Z"),
            Outcome.PENDING,
            Reason.REQUESTED,
            Action.START,
            id="an-annotation-starts-a-backup",
        ),
        pytest.param(
            Observation(
                wanted=None, seen=None, requested="2026-12-01T12:00:00Z", requested_started=True
            ),
            Outcome.SATISFIED,
            Reason.NOT_ASKED,
            None,
            id="a-started-request-is-not-redone",
        ),
        pytest.param(
            Observation(wanted=DAILY, seen=None, schedules=False),
            Outcome.SATISFIED,
            Reason.NO_SCHEDULES,
            None,
            id="a-worker-without-schedules",
        ),
    ],
)
def test_the_schedule_is_made_what_spec_backup_says(
    obs: Observation, outcome: Outcome, reason: Reason, action: Action | None
) -> None:
    """Created, updated (schedule or suspension), deleted, or left as it is."""
    decision = decide(obs)
    assert (decision.result.outcome, decision.result.reason, decision.action) == (
        outcome,
        reason,
        action,
    )
