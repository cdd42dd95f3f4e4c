"""resize's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from activities.steps import resize
from dbi import maintenance
from dbi.spec import ResizePolicy
from dbi.steps import Outcome

GI = Decimal(2**30)
HELD = maintenance.Hold(
    until=datetime(2026, 12, 5, 2, tzinfo=UTC), seconds=3600.0, window="Sat 02:00 UTC for 4h"
)


RS = resize.Observation(
    cpu=2,
    memory=2 * GI,
    storage=10 * GI,
    policy=ResizePolicy.RESTART,
    allow_restart=False,
    stopped=False,
    restart_required=False,
    vmi_sockets=2,
    vmi_memory=2 * GI,
    claim_request=10 * GI,
    claim_capacity=10 * GI,
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(RS, "SizeSynced", None, id="synced"),
        pytest.param(
            replace(RS, storage=20 * GI),
            "StorageExpanding",
            resize.Action.GROW_CLAIM,
            id="grow-claim",
        ),
        pytest.param(
            replace(RS, storage=20 * GI, expandable=False, storage_class="fixed"),
            "StorageNotExpandable",
            None,
            id="class-cannot-expand",
        ),
        pytest.param(
            replace(RS, storage=20 * GI, claim_request=20 * GI),
            "StorageExpanding",
            None,
            id="wait-capacity",
        ),
        pytest.param(
            replace(RS, claim_capacity=None, stopped=True),
            "StorageBinding",
            None,
            id="claim-not-bound",
        ),
        pytest.param(
            replace(RS, restart_required=True),
            "Restarting",
            resize.Action.RESTART,
            id="restart-policy",
        ),
        pytest.param(
            replace(RS, restart_required=True, policy=ResizePolicy.DEFERRED),
            "RestartRequired",
            None,
            id="deferred-waits",
        ),
        pytest.param(
            replace(RS, restart_required=True, policy=ResizePolicy.DEFERRED, allow_restart=True),
            "Restarting",
            resize.Action.RESTART,
            id="forced",
        ),
        pytest.param(
            replace(RS, restart_required=True, hold=HELD),
            "MaintenanceWindow",
            None,
            id="held-for-the-window",
        ),
        pytest.param(
            replace(RS, restart_required=True, hold=HELD, allow_restart=True),
            "Restarting",
            resize.Action.RESTART,
            id="forced-through-the-window",
        ),
        pytest.param(
            replace(RS, restart_required=True, hold=HELD, policy=ResizePolicy.DEFERRED),
            "RestartRequired",
            None,
            id="deferred-waits-for-force-window-or-not",
        ),
        pytest.param(
            replace(RS, memory=3 * GI, hold=HELD), "LiveResizing", None, id="live-never-held"
        ),
        pytest.param(replace(RS, memory=3 * GI), "LiveResizing", None, id="live-pending"),
        pytest.param(
            replace(RS, stopped=True, restart_required=True, vmi_sockets=None, vmi_memory=None),
            "SizeSynced",
            None,
            id="stopped",
        ),
    ],
)
def test_resize(obs: resize.Observation, reason: str, action: resize.Action | None) -> None:
    """Storage grows first; a restart happens only when the policy or force_resize allows it."""
    decided = resize.decide(obs)
    decision, chosen = decided.result, decided.action
    assert (decision.reason, chosen) == (reason, action)


@pytest.mark.parametrize("storage_class", ["fixed", None])
def test_a_disk_that_cannot_grow_stalls_naming_the_class(storage_class: str | None) -> None:
    """A class without allowVolumeExpansion (or no class) is Terminal, not a retry loop:
    the API server would refuse the larger request every time."""
    decided = resize.decide(
        replace(RS, storage=20 * GI, expandable=False, storage_class=storage_class)
    )
    assert decided.result.outcome is Outcome.TERMINAL and decided.action is None
    expected = "StorageClass fixed" if storage_class else "no StorageClass"
    assert expected in decided.result.message
    assert "allowVolumeExpansion" in decided.result.message


def test_a_held_restart_looks_again_when_the_window_opens() -> None:
    """The step's hint is the time to the opening: the workflow's durable timer."""
    decided = resize.decide(replace(RS, restart_required=True, hold=HELD))
    assert decided.result.requeue_after_seconds == 3600.0
    assert "2026-12-05T02:00:00Z" in decided.result.message
