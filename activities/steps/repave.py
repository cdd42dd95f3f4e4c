"""repave (RootDiskCurrent): the VM boots a root disk made from the instance's image.

The image is ``spec.image``, or the orchestrator's image for ``spec.version`` when it
is unset (``machine.image_for``). Each image gets its own root disk
(``<name>-root-<hash of the image>``, ``activities.infra.manifests``); PostgreSQL's data
lives on the data disk, which a repave never touches. When the image changes, one
action per look, in this order:

1. create the new root disk from the new image (``RootDiskCreated``);
2. point the VM's ``root`` volume at it (``RootDiskSwitched``): KubeVirt marks the VM
   RestartRequired;
3. restart the VM (``Repaving``: its VMI deleted, so KubeVirt boots a new one from the
   template), unless the instance is stopped: it boots the new disk when started. A
   maintenance window holds the restart until it opens (``MaintenanceWindow``, the
   opening as a durable timer), unless ``dbi resize --force`` or the restart annotation
   asks for it now;
4. once the VM runs on the new disk (or is stopped), delete the root disks of former
   images (``OldRootDiskDeleted``).

Going back is the same path: set ``spec.image`` back, and the step makes (or finds) that
image's disk and restarts onto it. A one-disk instance (created before root disks: its
data disk was made from the image, and holds the OS and the data) keeps booting it;
an image change there is Terminal (``OneDiskLayout``), naming the way over: a backup
restored into a new instance. Idempotency key: the names (one root disk per image) and
the VMI's UID (a restart deletes the VMI observed; a retry finds a new one, or none).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import machine, manifests, ownership
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance
from activities.infra.machine import image_for
from activities.steps.loop import Anatomy
from dbi import maintenance, names
from dbi.pipeline import REPAVE as SPEC
from dbi.spec import PowerState
from dbi.steps import AT_ONCE, Common, Decision, StepInput

RESTART_CHECK_SECONDS = 2.0


class Reason(StrEnum):
    CURRENT = SPEC.condition_type
    ONE_DISK = "OneDisk"
    ONE_DISK_LAYOUT = Common.ONE_DISK_LAYOUT
    CREATED = "RootDiskCreated"
    SWITCHED = "RootDiskSwitched"
    REPAVING = "Repaving"
    RESTARTING = "RootDiskRestarting"
    OLD_DELETED = "OldRootDiskDeleted"
    OWNERS_SYNCED = Common.OWNERS_SYNCED
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW


class Action(StrEnum):
    CREATE = "create-root"
    SWITCH = "switch-root"
    RESTART = "restart"
    DELETE_OLD = "delete-old-roots"
    APPLY = "apply-root"


@dataclass(frozen=True, kw_only=True)
class Observation:
    image: str  # the image the instance should boot
    root: str  # the root disk made from it
    one_disk: bool = False  # the VM boots its data disk (no root volume)
    one_disk_image: str | None = None  # the image that one disk was made from
    template_root: str | None = None  # the root disk the VM's template boots
    template_image: str | None = None  # the image that one was made from
    root_exists: bool = True
    root_follows_policy: bool = True
    stopped: bool = False
    vmi_root: str | None = None  # the root disk the running VMI booted; None: no VMI
    vmi_deleting: bool = False
    old_roots: tuple[str, ...] = ()  # the instance's root disks of other images
    version: str | None = None  # the PostgreSQL version last observed (for the message)
    hold: maintenance.Hold | None = None  # the restart waits for the window
    children: tuple[ownership.Child, ...] = ()


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""
    if obs.one_disk:
        return _one_disk(obs)
    if (change := _new_root(obs) or _restart(obs)) is not None:
        return change
    if obs.old_roots:
        message = f"The root disks of former images were deleted: {', '.join(obs.old_roots)}."
        return SPEC.pending(Reason.OLD_DELETED, message[:512], Action.DELETE_OLD, after=AT_ONCE)
    if not obs.root_follows_policy:
        message = "The root disk's owner reference now follows deletionPolicy."
        return SPEC.pending(Reason.OWNERS_SYNCED, message, Action.APPLY, after=AT_ONCE)
    message = f"The VM boots a root disk made from {obs.image}."
    return SPEC.satisfied(Reason.CURRENT, message, image=obs.image)


def _new_root(obs: Observation) -> Decision[Action] | None:
    """The VM's template on another root disk: make the image's, then point at it."""
    if obs.template_root == obs.root:
        return None
    if not obs.root_exists:
        message = f"A root disk from {obs.image} was created."
        return SPEC.pending(Reason.CREATED, message, Action.CREATE, after=AT_ONCE)
    was = f" (was {obs.template_image})" if obs.template_image else ""
    message = f"The VM boots the root disk from {obs.image} from its next start{was}."
    return SPEC.pending(Reason.SWITCHED, message, Action.SWITCH, after=AT_ONCE)


def _restart(obs: Observation) -> Decision[Action] | None:
    """A running VM on another root disk restarts; None once it runs on the image's, or
    is stopped (it boots that disk when started)."""
    if obs.stopped:
        return None
    if obs.vmi_root is None:
        message = f"The VM boots the root disk from {obs.image}."
        return SPEC.pending(Reason.RESTARTING, message, after=RESTART_CHECK_SECONDS)
    if obs.vmi_root == obs.root:
        return None
    if obs.vmi_deleting:
        message = f"The VM restarts on the root disk from {obs.image}."
        return SPEC.pending(Reason.RESTARTING, message, after=RESTART_CHECK_SECONDS)
    if obs.hold is not None:
        message = obs.hold.message(f"The restart onto the root disk from {obs.image}")
        return SPEC.pending(
            Reason.MAINTENANCE_WINDOW, message[:512], after=obs.hold.seconds, held=True
        )
    was = f", was PostgreSQL {obs.version}" if obs.version else ""
    message = f"The VM restarts on a root disk from {obs.image}{was}; the data disk stays."
    return SPEC.pending(Reason.REPAVING, message, Action.RESTART, after=RESTART_CHECK_SECONDS)


def _one_disk(obs: Observation) -> Decision[Action]:
    """A one-disk instance: it boots the disk it has; a new image cannot be laid on it."""
    have = obs.one_disk_image
    if have is not None and have != obs.image:
        message = (
            f"spec.image asks for {obs.image}, but this instance keeps its OS and its data "
            f"on one disk, made from {have} before dbi gave VMs a root disk: replacing the "
            "OS would replace the data. Move it to a new instance (dbi backup, then a new "
            f"DBInstance with spec.restore.from.backup), or set spec.image back to {have}."
        )
        return SPEC.terminal(Reason.ONE_DISK_LAYOUT, message[:512])
    message = "The VM boots its one disk (OS and data, made from its image)."
    return SPEC.satisfied(Reason.ONE_DISK, message, image=have)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube, ns = ctx.kube, instance.namespace
    image = image_for(instance, ctx.config.images) or ""
    root = manifests.root_claim_name(instance.name, image)
    observed = kube.get_custom(*KUBEVIRT, ns, "virtualmachines", instance.name)
    template_root = manifests.root_of(observed)
    if observed is not None and template_root is None:
        data = kube.pvc(ns, manifests.data_claim_name(instance))
        meta = ownership.meta_of(data, kube)
        return Observation(
            image=image,
            root=root,
            one_disk=True,
            one_disk_image=manifests.image_of({"metadata": meta}),
        )
    labels = {names.INSTANCE_LABEL: instance.name, manifests.DISK_LABEL: manifests.ROOT}
    listed = {
        str(c.metadata.name if c.metadata else ""): ownership.meta_of(c, kube)
        for c in kube.pvcs(ns, labels)
    }
    if root not in listed:  # a claim of that name without our labels is not ours to take
        listed[root] = ownership.meta_of(kube.pvc(ns, root), kube)
    children = tuple(
        ownership.Child("PersistentVolumeClaim", name, meta)
        for name, meta in sorted(listed.items())
    )
    mine = {c.name for c in children if ownership.classify(c, instance.uid) is ownership.Claim.OURS}
    spec = instance.model.spec
    stopped = spec.power_state is PowerState.STOPPED
    vmi = None
    if not stopped and template_root == root:
        vmi = kube.get_custom(*KUBEVIRT, ns, "virtualmachineinstances", instance.name)
    observed_status = instance.model.status.observed if instance.model.status else None
    root_child = next(c for c in children if c.name == root)
    return Observation(
        image=image,
        root=root,
        template_root=template_root,
        template_image=manifests.image_of({"metadata": listed.get(template_root or "")}),
        root_exists=root_child.meta is not None,
        root_follows_policy=root_child.meta is None
        or ownership.follows_policy(root_child, instance),
        stopped=stopped,
        vmi_root=manifests.claim_of((vmi or {}).get("spec") or {}, manifests.ROOT),
        vmi_deleting=bool(((vmi or {}).get("metadata") or {}).get("deletionTimestamp")),
        old_roots=tuple(sorted(mine - {root})),
        version=observed_status.postgres_version if observed_status else None,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
        children=children,
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    kube, ns = ctx.kube, instance.namespace
    if action in (Action.CREATE, Action.APPLY):
        machine.create_root(ctx, instance, obs.image)
    elif action is Action.SWITCH:
        machine.boot_root(ctx, instance, obs.root)
    elif action is Action.RESTART:
        kube.delete("VirtualMachineInstance", ns, instance.name)
    else:
        for name in obs.old_roots:
            kube.delete("PersistentVolumeClaim", ns, name)


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
