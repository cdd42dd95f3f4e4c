"""The admin step's decision: dbi's admin credential logs in, is rotated on time, and is
recovered when lost or refused (plain data)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from activities.infra.admin_credential import ROTATED_AT, Credential
from activities.infra.postgres import Login
from activities.steps import admin
from dbi import maintenance
from dbi.steps import Outcome

UP = admin.Observation(stopped=False, address="127.10.0.2", login=Login.OK, vmi_uid="vmi-1")
REFUSED = replace(UP, login=Login.REFUSED)
RESET = replace(REFUSED, reset=True, boot_data_ready=True)
A = admin.Action
HOLD = maintenance.Hold(
    until=datetime(2026, 12, 6, 3, tzinfo=UTC), seconds=3600.0, window="daily at 03:00 UTC"
)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(UP, Outcome.SATISFIED, "AdminReady", None, id="logs-in"),
        pytest.param(
            admin.Observation(stopped=True), Outcome.SATISFIED, "Stopped", None, id="stopped"
        ),
        pytest.param(
            replace(UP, address=None), Outcome.PENDING, "NoAddress", None, id="no-address"
        ),
        pytest.param(
            replace(UP, login=Login.UNREACHABLE), Outcome.PENDING, "Booting", None,
            id="not-answering-is-not-a-refusal",
        ),
        pytest.param(
            replace(UP, rotation_due=True), Outcome.PENDING, "AdminRotated", A.ROTATE,
            id="scheduled-rotation",
        ),
        pytest.param(
            replace(UP, next_login=Login.REFUSED), Outcome.PENDING, "AdminRotated",
            A.FINISH_ROTATION, id="crash-after-writing-next-before-alter-role",
        ),
        pytest.param(
            replace(REFUSED, next_login=Login.OK), Outcome.PENDING, "AdminRotated",
            A.PROMOTE_NEXT, id="crash-after-alter-role-before-promoting-next",
        ),
        pytest.param(
            REFUSED, Outcome.PENDING, "AdminResetRequested", A.REQUEST_RESET,
            id="refused-asks-for-a-reset",
        ),
        pytest.param(
            replace(RESET, boot_data_ready=False), Outcome.PENDING, "AdminResetRequested",
            None, id="reset-waits-for-the-boot-data",
        ),
        pytest.param(
            replace(RESET, restart_allowed=True), Outcome.PENDING, "AdminResetRestarting",
            A.RESTART, id="reset-restarts-under-restart-policy",
        ),
        pytest.param(
            RESET, Outcome.PENDING, "AdminResetHeld", None, id="reset-held-under-deferred",
        ),
        pytest.param(
            replace(RESET, restart_allowed=True, hold=HOLD), Outcome.PENDING,
            "MaintenanceWindow", None, id="reset-restart-waits-for-the-window",
        ),
        pytest.param(
            replace(RESET, restart_allowed=True, reset_vmi="vmi-1"), Outcome.PENDING,
            "AdminResetRestarting", A.RESTART, id="restart-recorded-vmi-still-there-again",
        ),
        pytest.param(
            replace(RESET, reset_vmi="vmi-0"), Outcome.TERMINAL, "AdminResetFailed", None,
            id="rebooted-with-the-reset-and-still-refused",
        ),
        pytest.param(
            replace(UP, reset=True), Outcome.PENDING, "AdminResetDone", A.CLEAR_RESET,
            id="reset-took",
        ),
        pytest.param(
            replace(UP, login=Login.INSECURE), Outcome.TERMINAL, "InsecureAuthentication",
            None, id="a-guest-asking-for-the-password-in-clear-is-not-reset",
        ),
        pytest.param(
            replace(REFUSED, next_login=Login.INSECURE), Outcome.TERMINAL,
            "InsecureAuthentication", None, id="nor-rotated-when-it-asks-so-for-next",
        ),
    ],
)  # fmt: skip
def test_admin(
    obs: admin.Observation, outcome: Outcome, reason: str, action: admin.Action | None
) -> None:
    """One change per look; a refusal is recovered by a reset at boot, restarting only
    when the restart policy allows; a rotation cut short is finished, never repeated."""
    decided = admin.decide(obs)
    decision, act = decided.result, decided.action
    assert (decision.outcome, decision.reason, act) == (outcome, reason, action)


def at(when: datetime) -> Credential:
    return Credential(uid="u", data={"password": "p"}, annotations={ROTATED_AT: when.isoformat()})


NOW = datetime(2026, 12, 1, tzinfo=UTC)
DAY = 86400.0


@pytest.mark.parametrize(
    ("credential", "interval", "due"),
    [
        pytest.param(at(NOW - timedelta(days=31)), 30 * DAY, True, id="past-the-interval"),
        pytest.param(at(NOW - timedelta(days=29)), 30 * DAY, False, id="within-the-interval"),
        pytest.param(at(NOW - timedelta(days=400)), None, False, id="no-schedule"),
        pytest.param(Credential(uid="u", data={}, annotations={}), DAY, False, id="no-stamp"),
    ],
)
def test_rotation_due(credential: Credential, interval: float | None, due: bool) -> None:
    """The admin password is due for rotation once the interval has passed since the last."""
    assert admin.rotation_due(credential, interval, NOW) is due
