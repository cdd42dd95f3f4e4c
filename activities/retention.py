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
follow the policy. Idempotent: each change sets fields to fixed values; the volume's
former policy is recorded on it once, in ``dbi.dev/reclaim-policy-was``. The claim is
the instance's only (``activities.ownership``), else the step stops.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client as k8s
from temporalio import activity

from activities import manifests, ownership
from activities.context import AT_ONCE, Context, Step, result
from activities.kube import Instance, or_none
from dbi import names
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "retention", "RetentionSynced"
RETAIN = "Retain"
BIND_CHECK = 2.0


class Reason(StrEnum):
    RETAINED = "Retained"
    DELETED_WITH_INSTANCE = "DeletedWithInstance"
    OWNERS_SYNCED = "OwnerReferencesSynced"
    DISK_UNBOUND = "DiskUnbound"
    VOLUME_RETAINED = "VolumeRetained"
    VOLUME_RESTORED = "VolumeRestored"


class Action(StrEnum):
    NONE = "none"
    APPLY_CLAIM = "apply-claim"
    RETAIN_VOLUME = "retain-volume"
    RESTORE_VOLUME = "restore-volume"


@dataclass(frozen=True, kw_only=True)
class Observation:
    retain: bool
    claim_follows_policy: bool
    volume: str | None  # the PersistentVolume the claim is bound to; None: not bound (yet)
    reclaim_policy: str | None = None
    volume_marked: bool = False  # labelled with the instance and its former policy recorded
    policy_before: str | None = None  # what dbi.dev/reclaim-policy-was records


def decide(obs: Observation) -> tuple[StepResult, Action]:
    """Return the outcome and the one change to make (pure)."""

    def pending(reason: Reason, message: str, after: float = AT_ONCE) -> StepResult:
        return result(STEP, CONDITION, Outcome.PENDING, reason, message, requeue_after=after)

    if not obs.claim_follows_policy:
        return pending(
            Reason.OWNERS_SYNCED, "The data claim's owner reference now follows deletionPolicy."
        ), Action.APPLY_CLAIM
    if obs.retain:
        if obs.volume is None:
            return pending(
                Reason.DISK_UNBOUND,
                "The data disk is not bound to a volume yet; its retention waits for it.",
                BIND_CHECK,
            ), Action.NONE
        if obs.reclaim_policy != RETAIN or not obs.volume_marked:
            return pending(
                Reason.VOLUME_RETAINED,
                f"The volume {obs.volume} was set to reclaimPolicy Retain.",
            ), Action.RETAIN_VOLUME
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.RETAINED,
            f"deletionPolicy Retain: the VM, its data disk and the volume {obs.volume} "
            "outlive the instance, whichever way it is deleted.",
        ), Action.NONE
    if obs.policy_before is not None:
        return pending(
            Reason.VOLUME_RESTORED,
            f"The volume {obs.volume} got back reclaimPolicy {obs.policy_before}.",
        ), Action.RESTORE_VOLUME
    return result(
        STEP,
        CONDITION,
        Outcome.SATISFIED,
        Reason.DELETED_WITH_INSTANCE,
        "deletionPolicy Delete: the VM and its data disk go with the instance.",
    ), Action.NONE


def observe(
    instance: Instance, claim: ownership.Child, volume: k8s.V1PersistentVolume | None
) -> Observation:
    """Reduce the claim and its volume to what the policy is checked against."""
    meta = volume.metadata if volume is not None and volume.metadata is not None else None
    annotations = (meta.annotations if meta else None) or {}
    labels = (meta.labels if meta else None) or {}
    marked_ours = annotations.get(names.INSTANCE_UID_ANNOTATION) == instance.uid
    spec = volume.spec if volume is not None else None
    return Observation(
        retain=instance.retains,
        claim_follows_policy=ownership.follows_policy(claim, instance),
        volume=meta.name if meta else None,
        reclaim_policy=spec.persistent_volume_reclaim_policy if spec else None,
        volume_marked=marked_ours
        and labels.get(names.INSTANCE_LABEL) == instance.name
        and names.RECLAIM_POLICY_ANNOTATION in annotations,
        # Whichever instance recorded it: the volume is bound to this instance's claim (an
        # adopted one, say), so its former policy is this instance's to give back.
        policy_before=annotations.get(names.RECLAIM_POLICY_ANNOTATION),
    )


def act(
    ctx: Context,
    instance: Instance,
    action: Action,
    claim: k8s.V1PersistentVolumeClaim,
    volume: k8s.V1PersistentVolume | None,
) -> None:
    kube = ctx.kube
    if action is Action.APPLY_CLAIM:
        image = ((claim.metadata.annotations if claim.metadata else None) or {}).get(
            manifests.IMAGE_ANNOTATION, ""
        )
        kube.apply_pvc(manifests.data_claim(instance, image=image))
        return
    assert volume is not None and volume.metadata is not None and volume.spec is not None
    if action is Action.RETAIN_VOLUME:
        before = (volume.metadata.annotations or {}).get(names.RECLAIM_POLICY_ANNOTATION)
        body = {
            "metadata": {
                "labels": {names.INSTANCE_LABEL: instance.name},
                "annotations": {
                    names.INSTANCE_UID_ANNOTATION: instance.uid,
                    names.VOLUME_INSTANCE_ANNOTATION: f"{instance.namespace}/{instance.name}",
                    names.RECLAIM_POLICY_ANNOTATION: before
                    or volume.spec.persistent_volume_reclaim_policy
                    or "Delete",
                },
            },
            "spec": {"persistentVolumeReclaimPolicy": RETAIN},
        }
    else:
        body = {
            "metadata": {"annotations": {names.RECLAIM_POLICY_ANNOTATION: None}},
            "spec": {
                "persistentVolumeReclaimPolicy": (volume.metadata.annotations or {}).get(
                    names.RECLAIM_POLICY_ANNOTATION
                )
            },
        }
    kube.core.patch_persistent_volume(str(volume.metadata.name), body)


def bound_volume(
    ctx: Context, claim: k8s.V1PersistentVolumeClaim | None
) -> k8s.V1PersistentVolume | None:
    """Return the PersistentVolume ``claim`` is bound to, if it is bound."""
    bound = claim.spec.volume_name if claim is not None and claim.spec else None
    return or_none(lambda: ctx.kube.core.read_persistent_volume(bound)) if bound else None


def protect_volume(ctx: Context, instance: Instance) -> bool:
    """Set the data claim's volume to reclaimPolicy Retain, marked with the instance, if
    it is bound and not so yet (the teardown's last word under Retain); return whether
    a change was made."""
    claim = ctx.kube.pvc(instance.namespace, manifests.data_claim_name(instance))
    volume = bound_volume(ctx, claim)
    if claim is None or volume is None:
        return False
    child = ownership.Child("PersistentVolumeClaim", "", ownership.meta_of(claim, ctx.kube))
    obs = observe(instance, child, volume)
    if obs.reclaim_policy == RETAIN and obs.volume_marked:
        return False
    act(ctx, instance, Action.RETAIN_VOLUME, claim, volume)
    return True


class Retention(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        kube = self.ctx.kube
        name = manifests.data_claim_name(instance)
        claim = kube.pvc(instance.namespace, name)
        child = ownership.Child("PersistentVolumeClaim", name, ownership.meta_of(claim, kube))
        refused = ownership.gate(kube, STEP, CONDITION, instance, [child])
        if refused is not None:
            return refused
        if claim is None:
            return result(
                STEP,
                CONDITION,
                Outcome.PENDING,
                Reason.DISK_UNBOUND,
                "The data disk does not exist yet.",
                requeue_after=BIND_CHECK,
            )
        volume = bound_volume(self.ctx, claim)
        decision, action = decide(observe(instance, child, volume))
        if action is not Action.NONE:
            act(self.ctx, instance, action, claim, volume)
        return decision
