"""power (PowerSynced): runStrategy from spec.powerState, and the transition done.

Observes the VM's runStrategy, its VMI and ``printableStatus``. Sets runStrategy
(``Always`` or ``Halted``) with a narrow patch when it differs (Pending), then is
Pending until KubeVirt shows the transition done (VMI Running and printableStatus
Running, or no VMI and Stopped), which the watcher's wake brings; a look 30 s later is
the fallback (``announced``: the worker makes it, not the workflow). A VMI no node can
hold (its pod's PodScheduled condition says Unschedulable) is Pending with reason
Unschedulable and the scheduler's message. Idempotency key: runStrategy, set to a fixed
value.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.infra.machine import desired_strategy
from activities.steps.loop import Anatomy
from dbi.pipeline import POWER as SPEC
from dbi.spec import PowerState
from dbi.steps import Common, Decision, StepInput

# A transition's end is announced: the watcher wakes the instance when the VM or VMI
# reaches its new state (watcher/relevance.py). The look after this is only a fallback
# for a missed event; a short one made every booting VM a pass every few seconds, on a
# machine booting many.
TRANSITION_CHECK_SECONDS = 30.0


class Reason(StrEnum):
    RUNNING = "Running"
    STOPPED = Common.STOPPED
    STARTING = "Starting"
    STOPPING = "Stopping"
    VM_MISSING = "VMMissing"
    UNSCHEDULABLE = "Unschedulable"


class Action(StrEnum):
    SET_RUN_STRATEGY = "set-run-strategy"


@dataclass(frozen=True, kw_only=True)
class Observation:
    want: PowerState
    run_strategy: str | None  # None: no VM
    vmi_phase: str | None  # None: no VMI
    printable: str | None
    # Why no node can hold the VMI (its PodScheduled condition), when none can.
    unschedulable: str | None = None


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome, and whether runStrategy must be set (pure)."""

    def pending(reason: Reason, message: str, change: bool = False) -> Decision[Action]:
        # A transition under way, set by no change of this pass, ends with an event.
        announced = reason in (Reason.STARTING, Reason.STOPPING) and not change
        action = Action.SET_RUN_STRATEGY if change else None
        after = TRANSITION_CHECK_SECONDS
        return SPEC.pending(reason, message, action, after=after, announced=announced)

    if obs.run_strategy is None:
        return pending(Reason.VM_MISSING, "The VirtualMachine does not exist yet.")
    running = obs.want is PowerState.RUNNING
    strategy = "Always" if running else "Halted"
    change = obs.run_strategy != strategy
    if running:
        if not change and obs.vmi_phase == "Running" and obs.printable == "Running":
            message = "The VM is running."
            return SPEC.satisfied(Reason.RUNNING, message, power_state=PowerState.RUNNING)
        if not change and obs.unschedulable is not None:
            return pending(
                Reason.UNSCHEDULABLE,
                f"No node can hold the VM ({obs.unschedulable}). Lower "
                "spec.resources.memory or spec.resources.cpu, or add capacity: the VM "
                "starts once a node fits it.",
            )
        return pending(Reason.STARTING, "The VM is starting.", change)
    if not change and obs.vmi_phase is None and obs.printable == "Stopped":
        message = "The VM is stopped, as asked."
        return SPEC.satisfied(Reason.STOPPED, message, power_state=PowerState.STOPPED)
    return pending(Reason.STOPPING, "The VM is stopping.", change)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube = ctx.kube
    vm = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
    vmi = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name)
    return Observation(
        want=instance.model.spec.power_state,
        run_strategy=None if vm is None else vm.get("spec", {}).get("runStrategy", ""),
        vmi_phase=None if vmi is None else vmi.get("status", {}).get("phase", "Pending"),
        printable=None if vm is None else vm.get("status", {}).get("printableStatus"),
        unschedulable=_unschedulable(vmi),
    )


def _unschedulable(vmi: Manifest | None) -> str | None:
    """The scheduler's message when the VMI's pod cannot be placed (KubeVirt copies
    the pod's PodScheduled condition onto a Scheduling VMI); None otherwise."""
    status = (vmi or {}).get("status", {})
    if status.get("phase") not in ("Pending", "Scheduling"):
        return None
    for c in status.get("conditions", []):
        if c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable":
            return str(c.get("message") or "Unschedulable")
    return None


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    ctx.kube.objects.patch_namespaced_custom_object(
        *KUBEVIRT,
        instance.namespace,
        "virtualmachines",
        instance.name,
        {"spec": {"runStrategy": desired_strategy(instance)}},
    )


STEP = Anatomy(SPEC, observe, decide, act)
