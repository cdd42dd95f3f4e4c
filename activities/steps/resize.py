"""resize (SizeSynced): CPU, memory and disk as the spec says.

The vm step puts CPU and memory into the VM's template; KubeVirt applies what it can
live. This step observes the rest: a VM that reports ``RestartRequired`` is restarted
(its VMI deleted, so KubeVirt boots a new one) under ``resizePolicy: Restart`` (in the
maintenance window, if the spec has one: until it opens, Pending MaintenanceWindow
with the opening as its durable timer) or when a ``force_resize`` update or the restart
annotation allows it, and otherwise waits (Pending, RestartRequired);
a live change is Pending until the VMI shows it. Storage grows through the PVC
request, Pending until its capacity shows it; a claim whose StorageClass does not allow
volume expansion is Terminal (StorageNotExpandable, naming the class), as the API
server would refuse the larger request. A stopped VM takes its size at the next
start. Idempotency key: the claim's request (set to the spec's) and the VMI's UID (a
restart deletes the VMI the step observed; a retry finds a new one, or none).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from activities.infra import manifests
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.steps.loop import Anatomy
from dbi import maintenance
from dbi.maintenance import Restart
from dbi.pipeline import RESIZE as SPEC
from dbi.quantity import parse_quantity
from dbi.spec import PowerState, ResizePolicy
from dbi.steps import Common, Decision, StepInput

CHECK_SECONDS = 2.0
DEFERRED_CHECK_SECONDS = 300.0


class Reason(StrEnum):
    SYNCED = SPEC.condition_type
    EXPANDING = "StorageExpanding"
    BINDING = "StorageBinding"
    RESTARTING = Common.RESTARTING
    RESTART_REQUIRED = Common.RESTART_REQUIRED
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW
    LIVE_RESIZING = "LiveResizing"
    NOT_EXPANDABLE = "StorageNotExpandable"


class Action(StrEnum):
    GROW_CLAIM = "grow-claim"
    RESTART = "restart"


@dataclass(frozen=True, kw_only=True)
class Observation:
    cpu: int
    memory: Decimal
    storage: Decimal
    policy: ResizePolicy
    allow_restart: bool
    stopped: bool
    restart_required: bool
    vmi_sockets: int | None
    vmi_memory: Decimal | None
    claim_request: Decimal | None
    claim_capacity: Decimal | None
    # Looked up only when the claim must grow: the claim's StorageClass (None: it has
    # none) and whether it allows volume expansion.
    storage_class: str | None = None
    expandable: bool = True
    # As written (the spec's memory, the claim's capacity), for status.
    memory_quantity: str | None = None
    capacity: str | None = None
    # A restart under resizePolicy Restart waits for this (None: it may run now).
    hold: maintenance.Hold | None = None


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""

    if (disk := _disk(obs)) is not None:
        return disk
    if not obs.stopped and obs.restart_required:
        allowed = obs.policy is ResizePolicy.RESTART
        when = maintenance.planned_restart(allowed=allowed, forced=obs.allow_restart, hold=obs.hold)
        if when is Restart.NOW:
            message = "The VM restarts to take its new size."
            return SPEC.pending(Reason.RESTARTING, message, Action.RESTART, after=CHECK_SECONDS)
        if when is Restart.AT_WINDOW and obs.hold is not None:
            message = obs.hold.message("The restart for the new size")
            return SPEC.pending(
                Reason.MAINTENANCE_WINDOW, message, after=obs.hold.seconds, held=True
            )
        return SPEC.pending(
            Reason.RESTART_REQUIRED,
            "The new size needs a restart; resizePolicy is Deferred, so it waits for force_resize.",
            after=DEFERRED_CHECK_SECONDS,
            held=True,
        )
    live = (obs.vmi_sockets, obs.vmi_memory) == (obs.cpu, obs.memory)
    if not obs.stopped and not live:
        message = "The VM is taking its new size live."
        return SPEC.pending(Reason.LIVE_RESIZING, message, after=CHECK_SECONDS)
    return SPEC.satisfied(
        Reason.SYNCED,
        "CPU, memory and disk match the spec.",
        cpu=obs.cpu,
        memory=obs.memory_quantity,
        storage=obs.capacity,
    )


def _disk(obs: Observation) -> Decision[Action] | None:
    """The data disk's part of the decision: None once it has the spec's size."""
    grow = obs.claim_request is not None and obs.claim_request < obs.storage
    if grow and not obs.expandable:
        return _not_expandable(obs.storage_class)
    if obs.claim_capacity is None and not grow:
        message = "The data disk's claim is not bound to a volume yet."
        return SPEC.pending(Reason.BINDING, message, after=CHECK_SECONDS)
    if grow or obs.claim_capacity is None or obs.claim_capacity < obs.storage:
        action = Action.GROW_CLAIM if grow else None
        message = "The data disk is being expanded."
        return SPEC.pending(Reason.EXPANDING, message, action, after=CHECK_SECONDS)
    return None


def _not_expandable(storage_class: str | None) -> Decision[Action]:
    where = (
        f"StorageClass {storage_class} does not allow volume expansion"
        if storage_class
        else "The data claim has no StorageClass, so it cannot be expanded"
    )
    message = (
        f"{where}: the data disk keeps its size and its data, and cannot grow to "
        "spec.resources.storage. Set allowVolumeExpansion: true on the class, then run "
        "dbi retry."
    )
    return SPEC.terminal(Reason.NOT_EXPANDABLE, message)


def _restart_required(vm: Manifest | None) -> bool:
    conditions = (vm or {}).get("status", {}).get("conditions", [])
    return any(c.get("type") == "RestartRequired" and c.get("status") == "True" for c in conditions)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube, spec = ctx.kube, instance.model.spec
    vm = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
    vmi = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name)
    claim = kube.pvc(instance.namespace, manifests.data_claim_name(instance))
    status = (vmi or {}).get("status", {})
    request = (
        (claim.spec.resources.requests or {}).get("storage")
        if claim and claim.spec and claim.spec.resources
        else None
    )
    capacity = (claim.status.capacity or {}).get("storage") if claim and claim.status else None
    guest = status.get("memory", {}).get("guestCurrent")
    storage = spec.resources.storage_bytes()
    storage_class = claim.spec.storage_class_name if claim and claim.spec else None
    expandable = True
    if request and parse_quantity(request) < storage:  # only a claim that must grow
        found = kube.storage_class(storage_class) if storage_class else None
        expandable = found is not None and bool(found.allow_volume_expansion)
    return Observation(
        cpu=spec.resources.cpu,
        memory=spec.resources.memory_bytes(),
        storage=storage,
        policy=spec.resize_policy,
        allow_restart=step_input.allow_restart,
        stopped=spec.power_state is PowerState.STOPPED,
        restart_required=_restart_required(vm),
        vmi_sockets=status.get("currentCPUTopology", {}).get("sockets"),
        vmi_memory=parse_quantity(str(guest)) if guest else None,
        claim_request=parse_quantity(request) if request else None,
        claim_capacity=parse_quantity(capacity) if capacity else None,
        storage_class=storage_class,
        expandable=expandable,
        memory_quantity=spec.resources.memory,
        capacity=capacity,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    kube = ctx.kube
    if action is Action.GROW_CLAIM:
        kube.core.patch_namespaced_persistent_volume_claim(
            manifests.data_claim_name(instance),
            instance.namespace,
            {
                "spec": {
                    "resources": {"requests": {"storage": instance.model.spec.resources.storage}}
                }
            },
        )
    else:
        kube.objects.delete_namespaced_custom_object(
            *KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name
        )


STEP = Anatomy(SPEC, observe, decide, act)
