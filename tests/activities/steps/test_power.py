"""power's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

import pytest

from activities.steps import power
from dbi.spec import PowerState
from dbi.steps import Outcome


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "patch"),
    [
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING,
                run_strategy="Always",
                vmi_phase="Running",
                printable="Running",
            ),
            Outcome.SATISFIED,
            "Running",
            False,
            id="running",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING, run_strategy="Halted", vmi_phase=None, printable="Stopped"
            ),
            Outcome.PENDING,
            "Starting",
            True,
            id="start",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING,
                run_strategy="Always",
                vmi_phase="Scheduling",
                printable="Starting",
            ),
            Outcome.PENDING,
            "Starting",
            False,
            id="booting",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.STOPPED,
                run_strategy="Always",
                vmi_phase="Running",
                printable="Running",
            ),
            Outcome.PENDING,
            "Stopping",
            True,
            id="stop",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.STOPPED,
                run_strategy="Halted",
                vmi_phase="Running",
                printable="Stopping",
            ),
            Outcome.PENDING,
            "Stopping",
            False,
            id="stopping",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.STOPPED, run_strategy="Halted", vmi_phase=None, printable="Stopped"
            ),
            Outcome.SATISFIED,
            "Stopped",
            False,
            id="stopped",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING,
                run_strategy="Always",
                vmi_phase="Scheduling",
                printable="ErrorUnschedulable",
                unschedulable="0/1 nodes are available: 1 Insufficient memory.",
            ),
            Outcome.PENDING,
            "Unschedulable",
            False,
            id="unschedulable",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING, run_strategy=None, vmi_phase=None, printable=None
            ),
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


def test_an_unschedulable_vm_says_why_and_what_to_change() -> None:
    """The scheduler's message and the fields to lower are in the condition's message."""
    scheduler = "0/3 nodes are available: 3 Insufficient memory."
    decided = power.decide(
        power.Observation(
            want=PowerState.RUNNING,
            run_strategy="Always",
            vmi_phase="Scheduling",
            printable="",
            unschedulable=scheduler,
        )
    )
    assert scheduler in decided.result.message
    assert "spec.resources.memory" in decided.result.message


def test_the_scheduler_message_is_read_only_from_a_vmi_waiting_for_a_node() -> None:
    """A PodScheduled condition left on a VMI that runs is no reason to wait."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    waiting = {"status": {"phase": "Scheduling", "conditions": [{**condition, "message": "m"}]}}
    running = {"status": {"phase": "Running", "conditions": [condition]}}
    assert power._unschedulable(waiting) == "m"
    assert power._unschedulable(running) is None
    assert power._unschedulable(None) is None


@pytest.mark.parametrize(
    ("obs", "announced"),
    [
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING,
                run_strategy="Always",
                vmi_phase="Scheduled",
                printable="Starting",
            ),
            True,
            id="booting",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.STOPPED,
                run_strategy="Halted",
                vmi_phase="Running",
                printable="Stopping",
            ),
            True,
            id="stopping",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING, run_strategy="Halted", vmi_phase=None, printable="Stopped"
            ),
            False,
            id="start-asked-by-this-pass",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING,
                run_strategy="Always",
                vmi_phase="Scheduling",
                printable="ErrorUnschedulable",
                unschedulable="m",
            ),
            False,
            id="unschedulable",
        ),
        pytest.param(
            power.Observation(
                want=PowerState.RUNNING, run_strategy=None, vmi_phase=None, printable=None
            ),
            False,
            id="no-vm",
        ),
    ],
)
def test_only_a_transition_under_way_is_announced(obs: power.Observation, announced: bool) -> None:
    """A VM starting or stopping, which this pass did not ask for, ends with an event
    the watcher wakes the instance on: its 30 s look is a fallback the worker may make.
    Not so a start this pass asked for, a VM no node holds, or one that does not exist."""
    result = power.decide(obs).result
    assert result.outcome is Outcome.PENDING and result.announced is announced
    assert result.requeue_after_seconds == power.TRANSITION_CHECK_SECONDS
