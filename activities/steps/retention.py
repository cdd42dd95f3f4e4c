"""retention (RetentionSynced): what deletionPolicy keeps is out of every deletion's reach.

Under ``deletionPolicy: Retain`` the VM, its data disk and the admin and cloud-init
Secrets carry no owner reference (the vm and credentials steps write them so), so no
cascade of the garbage collector (foreground, background, a finalizer removed by hand)
can take them; this step makes the same hold for the data claim, and sets the claim's
PersistentVolume to ``reclaimPolicy: Retain``, labelled with the instance, so that even
a deleted claim (a namespace deleted, a claim removed by hand) leaves the volume and
its data. Under ``Delete`` the claim carries the owner reference and the volume gets
back the reclaim policy it had before dbi changed it.

Observes the claim and its volume; one change at a time (Pending), Satisfied when both
follow the policy. Idempotency key: the claim and its volume; each change sets fields
to fixed values, and the volume's former policy is recorded on it once, in
``dbi.dev/reclaim-policy-was``. The claim is the instance's only
(``activities.infra.ownership``), else the step stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client as k8s

from activities.infra import manifests, ownership, volumes
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import Anatomy
from dbi import names
from dbi.pipeline import RETENTION as SPEC
from dbi.steps import AT_ONCE, Common, Decision, StepInput

BIND_CHECK_SECONDS = 2.0


class Reason(StrEnum):
    RETAINED = "Retained"
    DELETED_WITH_INSTANCE = "DeletedWithInstance"
    OWNERS_SYNCED = Common.OWNERS_SYNCED
    DISK_UNBOUND = "DiskUnbound"
    VOLUME_RETAINED = "VolumeRetained"
    VOLUME_RESTORED = "VolumeRestored"


class Action(StrEnum):
    APPLY_CLAIM = "apply-claim"
    RETAIN_VOLUME = "retain-volume"
    RESTORE_VOLUME = "restore-volume"


@dataclass(frozen=True, kw_only=True)
class Observation:
    retain: bool
    claim_exists: bool = True
    claim_follows_policy: bool
    volume: str | None  # the PersistentVolume the claim is bound to; None: not bound (yet)
    reclaim_policy: str | None = None
    volume_marked: bool = False  # labelled with the instance and its former policy recorded
    policy_before: str | None = None  # what dbi.dev/reclaim-policy-was records
    # What was read, for the action and the ownership check (None in pure tests).
    claim: k8s.V1PersistentVolumeClaim | None = None
    bound: k8s.V1PersistentVolume | None = None
    children: tuple[ownership.Child, ...] = ()


def _satisfied(reason: Reason, message: str) -> Decision[Action]:
    return SPEC.satisfied(reason, message)


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one change to make (pure)."""
    if not obs.claim_exists:
        message = "The data disk does not exist yet."
        return SPEC.pending(Reason.DISK_UNBOUND, message, after=BIND_CHECK_SECONDS)
    if not obs.claim_follows_policy:
        message = "The data claim's owner reference now follows deletionPolicy."
        return SPEC.pending(Reason.OWNERS_SYNCED, message, Action.APPLY_CLAIM, after=AT_ONCE)
    return _retained(obs) if obs.retain else _deleted_with_instance(obs)


def _retained(obs: Observation) -> Decision[Action]:
    """Under Retain: the volume bound, set to reclaimPolicy Retain and marked (pure)."""
    if obs.volume is None:
        message = "The data disk is not bound to a volume yet; its retention waits for it."
        return SPEC.pending(Reason.DISK_UNBOUND, message, after=BIND_CHECK_SECONDS)
    if obs.reclaim_policy != volumes.RETAIN or not obs.volume_marked:
        message = f"The volume {obs.volume} was set to reclaimPolicy Retain."
        return SPEC.pending(Reason.VOLUME_RETAINED, message, Action.RETAIN_VOLUME, after=AT_ONCE)
    return _satisfied(
        Reason.RETAINED,
        f"deletionPolicy Retain: the VM, its data disk and the volume {obs.volume} "
        "outlive the instance, whichever way it is deleted.",
    )


def _deleted_with_instance(obs: Observation) -> Decision[Action]:
    """Under Delete: a volume dbi set to Retain gets its former policy back (pure)."""
    if obs.policy_before is not None:
        message = f"The volume {obs.volume} got back reclaimPolicy {obs.policy_before}."
        return SPEC.pending(Reason.VOLUME_RESTORED, message, Action.RESTORE_VOLUME, after=AT_ONCE)
    return _satisfied(
        Reason.DELETED_WITH_INSTANCE,
        "deletionPolicy Delete: the VM and its data disk go with the instance.",
    )


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    """Read the data claim and its volume, and reduce them to what the policy is checked
    against."""
    found = volumes.read(ctx, instance)
    return Observation(
        retain=instance.retains,
        claim_exists=found.claim is not None,
        claim_follows_policy=ownership.follows_policy(found.child, instance),
        volume=found.name,
        reclaim_policy=found.reclaim_policy,
        volume_marked=found.marked,
        policy_before=found.policy_before,
        claim=found.claim,
        bound=found.bound,
        children=(found.child,),
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    kube, claim, volume = ctx.kube, obs.claim, obs.bound
    assert claim is not None
    if action is Action.APPLY_CLAIM:
        annotations = (claim.metadata.annotations if claim.metadata else None) or {}
        kube.apply_pvc(
            manifests.data_claim(
                instance,
                image=annotations.get(manifests.IMAGE_ANNOTATION),
                data_major=annotations.get(names.DATA_MAJOR_ANNOTATION),
            )
        )
        return
    assert volume is not None and volume.metadata is not None and volume.spec is not None
    if action is Action.RETAIN_VOLUME:
        volumes.retain(kube, instance, volume)
        return
    body = {
        "metadata": {"annotations": {names.RECLAIM_POLICY_ANNOTATION: None}},
        "spec": {
            "persistentVolumeReclaimPolicy": (volume.metadata.annotations or {}).get(
                names.RECLAIM_POLICY_ANNOTATION
            )
        },
    }
    kube.core.patch_persistent_volume(str(volume.metadata.name), body)


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
