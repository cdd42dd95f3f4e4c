"""An instance's data volume: the PersistentVolume its data claim is bound to, and
whether it outlives every deletion (``reclaimPolicy: Retain``, marked with the
instance), as the retention step keeps it and the teardown leaves it."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes import client as k8s

from activities.infra import manifests, ownership
from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from dbi import names

RETAIN = "Retain"


@dataclass(frozen=True, kw_only=True)
class DataVolume:
    """The data claim and the volume bound to it, as read."""

    claim: k8s.V1PersistentVolumeClaim | None
    child: ownership.Child  # the claim, for the ownership check
    bound: k8s.V1PersistentVolume | None
    reclaim_policy: str | None = None
    marked: bool = False  # labelled with the instance and its former policy recorded
    policy_before: str | None = None  # what dbi.dev/reclaim-policy-was records

    @property
    def name(self) -> str | None:
        meta = self.bound.metadata if self.bound is not None else None
        return meta.name if meta is not None else None

    @property
    def protected(self) -> bool:
        """No volume to lose (not bound), or one set to Retain and marked."""
        return self.bound is None or (self.reclaim_policy == RETAIN and self.marked)


def read(ctx: Context, instance: Instance) -> DataVolume:
    """Read the data claim and the volume it is bound to (``ownership.volume_of``)."""
    name = manifests.data_claim_name(instance)
    claim = ctx.kube.pvc(instance.namespace, name)
    child = ownership.Child("PersistentVolumeClaim", name, ownership.meta_of(claim, ctx.kube))
    volume = ownership.volume_of(ctx.kube, claim)
    meta = volume.metadata if volume is not None and volume.metadata is not None else None
    annotations = (meta.annotations if meta else None) or {}
    labels = (meta.labels if meta else None) or {}
    spec = volume.spec if volume is not None else None
    return DataVolume(
        claim=claim,
        child=child,
        bound=volume,
        reclaim_policy=spec.persistent_volume_reclaim_policy if spec else None,
        marked=annotations.get(names.INSTANCE_UID_ANNOTATION) == instance.uid
        and labels.get(names.INSTANCE_LABEL) == instance.name
        and names.RECLAIM_POLICY_ANNOTATION in annotations,
        # Whichever instance recorded it: the volume is bound to this instance's claim (an
        # adopted one, say), so its former policy is this instance's to give back.
        policy_before=annotations.get(names.RECLAIM_POLICY_ANNOTATION),
    )


def retain(kube: Kube, instance: Instance, volume: k8s.V1PersistentVolume) -> None:
    """Set ``volume`` to reclaimPolicy Retain, marked with the instance, recording the
    policy it had (once: a policy already recorded stays)."""
    assert volume.metadata is not None and volume.spec is not None
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
    kube.core.patch_persistent_volume(str(volume.metadata.name), body)


def protect(ctx: Context, instance: Instance) -> bool:
    """Set the data claim's volume to reclaimPolicy Retain, marked with the instance, if
    it is bound and not so yet (the teardown's last word under Retain); return whether
    a change was made."""
    found = read(ctx, instance)
    if found.claim is None or found.bound is None or found.protected:
        return False
    retain(ctx.kube, instance, found.bound)
    return True


def own_data_claim(ctx: Context, instance: Instance) -> bool:
    """Whether the instance's own data claim exists: its data has an admin password."""
    name = manifests.data_claim_name(instance)
    meta = ownership.meta_of(ctx.kube.pvc(instance.namespace, name), ctx.kube)
    claim = ownership.Child("PersistentVolumeClaim", name, meta)
    return ownership.classify(claim, instance.uid) is ownership.Claim.OURS


def marked_for(ctx: Context, instance: Instance, uid: str) -> bool:
    """Whether the instance's data claim is bound to a volume dbi marked as ``uid``'s."""
    claim = ctx.kube.pvc(instance.namespace, manifests.data_claim_name(instance))
    volume = ownership.volume_of(ctx.kube, claim)
    meta = volume.metadata if volume is not None else None
    annotations = (meta.annotations if meta is not None else None) or {}
    return annotations.get(names.INSTANCE_UID_ANNOTATION) == uid
