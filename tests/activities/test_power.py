"""power's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

import pytest

from activities import power
from dbi.spec import PowerState
from dbi.steps import Outcome


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "patch"),
    [
        pytest.param(
            power.Observation(PowerState.RUNNING, "Always", "Running", "Running"),
            Outcome.SATISFIED,
            "Running",
            False,
            id="running",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, "Halted", None, "Stopped"),
            Outcome.PENDING,
            "Starting",
            True,
            id="start",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, "Always", "Scheduling", "Starting"),
            Outcome.PENDING,
            "Starting",
            False,
            id="booting",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Always", "Running", "Running"),
            Outcome.PENDING,
            "Stopping",
            True,
            id="stop",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Halted", "Running", "Stopping"),
            Outcome.PENDING,
            "Stopping",
            False,
            id="stopping",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Halted", None, "Stopped"),
            Outcome.SATISFIED,
            "Stopped",
            False,
            id="stopped",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, None, None, None),
            Outcome.PENDING,
            "VMMissing",
            False,
            id="no-vm",
        ),
    ],
)
def test_power(obs: power.Observation, outcome: Outcome, reason: str, patch: bool) -> None:
    """runStrategy follows powerState; the step waits until KubeVirt shows the transition."""
    decided = power.decide(obs)
    decision, change = decided.result, decided.action is not None
    assert (decision.outcome, decision.reason, change) == (outcome, reason, patch)
