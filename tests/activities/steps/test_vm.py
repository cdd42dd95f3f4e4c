"""vm's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from typing import Any

import pytest

from activities.steps import vm

DESIRED: dict[str, Any] = {
    "metadata": {"name": "db"},
    "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"cpu": {"sockets": 2}}}}},
}


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        pytest.param(None, "VMCreated", id="missing"),
        pytest.param(DESIRED, "VMProvisioned", id="matches"),
        pytest.param(
            {
                "metadata": {"name": "db", "annotations": {"x": "y"}},
                "spec": {**DESIRED["spec"], "runStrategy": "Halted", "extra": 1},
            },
            "VMProvisioned",
            id="foreign-fields-and-run-strategy-ignored",
        ),
        pytest.param(
            {
                "metadata": {"name": "db"},
                "spec": {
                    "runStrategy": "Always",
                    "template": {"spec": {"domain": {"cpu": {"sockets": 8}}}},
                },
            },
            "VMUpdated",
            id="cpu-drift",
        ),
    ],
)
def test_vm(observed: dict[str, object] | None, reason: str) -> None:
    """The VM is created when missing and re-applied when a field we own drifted."""
    assert (
        vm.decide(vm.Observation(desired=DESIRED, observed=observed, uid="")).result.reason
        == reason
    )


OWNED = {"ownerReferences": [{"uid": "u-1", "kind": "DBInstance"}]}


@pytest.mark.parametrize(
    ("desired_meta", "observed_meta", "reason"),
    [
        pytest.param(OWNED, OWNED, "VMProvisioned", id="delete-policy-owned"),
        pytest.param({}, {}, "VMProvisioned", id="retain-policy-not-owned"),
        pytest.param({}, OWNED, "VMUpdated", id="retain-policy-but-owned"),
        pytest.param(OWNED, {}, "VMUpdated", id="delete-policy-but-not-owned"),
    ],
)
def test_vm_owner_reference_follows_the_deletion_policy(
    desired_meta: dict[str, Any], observed_meta: dict[str, Any], reason: str
) -> None:
    """The VM carries the instance's owner reference exactly when the desired VM does
    (deletionPolicy Delete); a difference either way is corrected."""
    desired = {**DESIRED, "metadata": {"name": "db", **desired_meta}}
    observed = {**DESIRED, "metadata": {"name": "db", **observed_meta}}
    assert (
        vm.decide(vm.Observation(desired=desired, observed=observed, uid="u-1")).result.reason
        == reason
    )
