"""power (PowerSynced): runStrategy from spec.powerState, and the transition done.

Observes the VM's runStrategy, its VMI and ``printableStatus``. Sets runStrategy
(``Always`` or ``Halted``) with a narrow patch when it differs (Pending), then is
Pending until KubeVirt shows the transition done (VMI Running and printableStatus
Running, or no VMI and Stopped), which the watcher's wake brings; a 30 s timer is the
fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from temporalio import activity

from activities.context import Step, result
from activities.kube import KUBEVIRT, Instance
from dbi.models import PowerState
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "power", "PowerSynced"
# A transition's end is announced: the watcher wakes the instance when the VM or VMI
# reaches its new state (watcher/relevance.py). The timer is only a fallback; a short
# one made every booting VM a pass every few seconds, on a machine booting many.
TRANSITION_CHECK = 30.0


class Reason(StrEnum):
    RUNNING = "Running"
    STOPPED = "Stopped"
    STARTING = "Starting"
    STOPPING = "Stopping"
    VM_MISSING = "VMMissing"


def desired_strategy(instance: Instance) -> str:
    return "Halted" if instance.model.spec.power_state is PowerState.STOPPED else "Always"


@dataclass(frozen=True)
class Observation:
    want: PowerState
    run_strategy: str | None  # None: no VM
    vmi_phase: str | None  # None: no VMI
    printable: str | None


def decide(obs: Observation) -> tuple[StepResult, bool]:
    """Return the outcome, and whether runStrategy must be set (pure)."""

    def pending(reason: Reason, message: str) -> StepResult:
        return result(
            STEP, CONDITION, Outcome.PENDING, reason, message, requeue_after=TRANSITION_CHECK
        )

    if obs.run_strategy is None:
        return pending(Reason.VM_MISSING, "The VirtualMachine does not exist yet."), False
    running = obs.want is PowerState.RUNNING
    strategy = "Always" if running else "Halted"
    change = obs.run_strategy != strategy
    if running:
        if not change and obs.vmi_phase == "Running" and obs.printable == "Running":
            return result(
                STEP,
                CONDITION,
                Outcome.SATISFIED,
                Reason.RUNNING,
                "The VM is running.",
                power_state=PowerState.RUNNING,
            ), False
        return pending(Reason.STARTING, "The VM is starting."), change
    if not change and obs.vmi_phase is None and obs.printable == "Stopped":
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.STOPPED,
            "The VM is stopped, as asked.",
            power_state=PowerState.STOPPED,
        ), False
    return pending(Reason.STOPPING, "The VM is stopping."), change


class Power(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        kube = self.ctx.kube
        vm = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
        vmi = kube.get_custom(
            *KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name
        )
        obs = Observation(
            want=instance.model.spec.power_state,
            run_strategy=None if vm is None else vm.get("spec", {}).get("runStrategy", ""),
            vmi_phase=None if vmi is None else vmi.get("status", {}).get("phase", "Pending"),
            printable=None if vm is None else vm.get("status", {}).get("printableStatus"),
        )
        decision, change = decide(obs)
        if change:
            kube.objects.patch_namespaced_custom_object(
                *KUBEVIRT,
                instance.namespace,
                "virtualmachines",
                instance.name,
                {"spec": {"runStrategy": desired_strategy(instance)}},
            )
        return decision
