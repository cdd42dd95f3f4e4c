"""The retention step's decision: what deletionPolicy keeps is out of every deletion's
reach (plain data)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from activities.steps import retention
from dbi.steps import Outcome

RETAINED = retention.Observation(
    retain=True,
    claim_follows_policy=True,
    volume="pvc-1",
    reclaim_policy="Retain",
    volume_marked=True,
    policy_before="Delete",
)
DELETED = retention.Observation(
    retain=False, claim_follows_policy=True, volume="pvc-1", reclaim_policy="Delete"
)
A = retention.Action


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(RETAINED, Outcome.SATISFIED, "Retained", None, id="retain-done"),
        pytest.param(
            replace(RETAINED, claim_follows_policy=False),
            Outcome.PENDING,
            "OwnerReferencesSynced",
            A.APPLY_CLAIM,
            id="retain-claim-still-owned",
        ),
        pytest.param(
            replace(RETAINED, volume=None, reclaim_policy=None, volume_marked=False),
            Outcome.PENDING,
            "DiskUnbound",
            None,
            id="retain-waits-for-the-volume",
        ),
        pytest.param(
            replace(RETAINED, reclaim_policy="Delete", volume_marked=False, policy_before=None),
            Outcome.PENDING,
            "VolumeRetained",
            A.RETAIN_VOLUME,
            id="retain-volume-still-delete",
        ),
        pytest.param(
            replace(RETAINED, volume_marked=False),
            Outcome.PENDING,
            "VolumeRetained",
            A.RETAIN_VOLUME,
            id="retain-volume-not-marked",
        ),
        pytest.param(DELETED, Outcome.SATISFIED, "DeletedWithInstance", None, id="delete-done"),
        pytest.param(
            replace(DELETED, volume=None),
            Outcome.SATISFIED,
            "DeletedWithInstance",
            None,
            id="delete-unbound-is-fine",
        ),
        pytest.param(
            replace(DELETED, claim_follows_policy=False),
            Outcome.PENDING,
            "OwnerReferencesSynced",
            A.APPLY_CLAIM,
            id="delete-claim-not-owned",
        ),
        pytest.param(
            replace(DELETED, reclaim_policy="Retain", policy_before="Delete"),
            Outcome.PENDING,
            "VolumeRestored",
            A.RESTORE_VOLUME,
            id="delete-after-retain-restores-the-volume",
        ),
    ],
)
def test_retention(
    obs: retention.Observation, outcome: Outcome, reason: str, action: retention.Action | None
) -> None:
    """Retain: the claim unowned and its volume reclaimPolicy Retain, marked; Delete: the
    claim owned and the volume's former policy back."""
    decided = retention.decide(obs)
    decision, act = decided.result, decided.action
    assert (decision.outcome, decision.reason, act) == (outcome, reason, action)
