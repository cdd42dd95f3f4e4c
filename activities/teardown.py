"""The teardown pipeline, run once the DBInstance is being deleted.

teardown_monitoring removes the metrics objects; teardown_vm deletes the VM, its data
disk and the instance's Secrets (``deletionPolicy: Delete``), or keeps the VM, its data
disk and volume, and the cloud-init and admin Secrets the VM needs to boot and be
managed, released from the instance, and deletes the app credentials Secret
(``Retain``); teardown_finalizer removes the finalizer last, and the instance is gone.
Each touches only the instance's own objects (``activities.ownership``) and does not
lean on the garbage collector, whichever cascade the deletion asked for; each is
Pending until what it asked for is observed done.
"""

from __future__ import annotations

from enum import StrEnum

from temporalio import activity

from activities import admin_credential, manifests, monitoring, ownership, retention, secrets
from activities.context import Activity, gone, load, result
from activities.kube import KUBEVIRT, Instance
from dbi import names
from dbi.steps import Outcome, StepInput, StepResult


class Reason(StrEnum):
    REMOVED = "Removed"
    REMOVING = "Removing"
    DELETED = "Deleted"
    DELETING = "Deleting"
    RELEASED = "Released"
    RELEASING = "Releasing"
    FINALIZER_REMOVED = "FinalizerRemoved"


class TeardownMonitoring(Activity):
    STEP, CONDITION = "teardown_monitoring", "MonitoringRemoved"

    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        instance = load(self.ctx, step_input)
        if instance is None:
            return gone(self.STEP, self.CONDITION)
        obs = monitoring.observe(self.ctx, instance)
        ours = [c for c in obs.children if ownership.classify(c, instance.uid) is OURS]
        if ours:
            monitoring.delete_ours(self.ctx, instance, obs)
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.PENDING,
                Reason.REMOVING,
                "The monitoring objects are being deleted.",
                requeue_after=1,
            )
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.SATISFIED,
            Reason.REMOVED,
            "The monitoring objects are gone.",
        )


OURS = ownership.Claim.OURS


class TeardownVM(Activity):
    """Delete the VM, its data disk and the instance's Secrets (Delete), or release what
    Retain keeps and delete the rest (Retain). Only the instance's own objects are
    touched; each is Pending until what it asked for is observed done."""

    STEP, CONDITION = "teardown_vm", "VMReleased"

    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        instance = load(self.ctx, step_input)
        if instance is None:
            return gone(self.STEP, self.CONDITION)
        kept, rest = self._children(instance)
        if not instance.retains:
            credential = self._admin_credential(instance)
            return self._delete(instance, [*kept, *rest, *credential])
        return self._release(instance, kept, rest)

    def _admin_credential(self, instance: Instance) -> list[ownership.Child]:
        """The instance's admin credential, in the orchestrator's namespace, if it is
        there (Retain keeps it: an instance that adopts the kept data needs it)."""
        home, name = self.ctx.config.namespace, admin_credential.name_for(instance.uid)
        found = self.ctx.kube.secret(home, name)
        return [] if found is None else [ownership.Child("Secret", name, {}, namespace=home)]

    def _children(self, instance: Instance) -> tuple[list[ownership.Child], list[ownership.Child]]:
        """The instance's own children this step looks after: those Retain keeps, the rest."""
        kube, ns = self.ctx.kube, instance.namespace
        vm = kube.get_custom(*KUBEVIRT, ns, "virtualmachines", instance.name)
        claim = kube.pvc(ns, manifests.data_claim_name(instance))

        def secret(name: str) -> ownership.Child:
            return ownership.Child("Secret", name, ownership.meta_of(kube.secret(ns, name), kube))

        kept = [
            ownership.Child("VirtualMachine", instance.name, ownership.meta_of(vm, kube)),
            ownership.Child(
                "PersistentVolumeClaim",
                manifests.data_claim_name(instance),
                ownership.meta_of(claim, kube),
            ),
            secret(secrets.cloudinit_name(instance)),
            secret(secrets.admin_name(instance)),
        ]
        rest = [secret(secrets.app_name(instance))]
        ours = [c for c in kept if ownership.classify(c, instance.uid) is OURS]
        return ours, [c for c in rest if ownership.classify(c, instance.uid) is OURS]

    def _delete(self, instance: Instance, ours: list[ownership.Child]) -> StepResult:
        if not ours:
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.SATISFIED,
                Reason.DELETED,
                "The VM, its data disk, its Secrets and admin credential are deleted.",
            )
        for child in ours:
            if not child.meta or not child.meta.get("deletionTimestamp"):
                self.ctx.kube.delete(child.kind, child.namespace or instance.namespace, child.name)
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.PENDING,
            Reason.DELETING,
            "The VM, its data disk and the instance's Secrets are being deleted.",
            requeue_after=1,
        )

    def _release(
        self, instance: Instance, kept: list[ownership.Child], rest: list[ownership.Child]
    ) -> StepResult:
        """Take the instance's owner references off what Retain keeps (marking it with the
        instance's UID, as new children are), set its volume to reclaimPolicy Retain, and
        delete the rest (the app credentials Secret)."""
        kube = self.ctx.kube
        held = [c for c in kept if c.owned_by(instance.uid)]
        for child in held:
            others = [r for r in child.owners() if r.get("uid") != instance.uid]
            kube.patch(
                child.kind,
                instance.namespace,
                child.name,
                {
                    "metadata": {
                        "ownerReferences": others or None,
                        "annotations": {names.INSTANCE_UID_ANNOTATION: instance.uid},
                        "resourceVersion": (child.meta or {}).get("resourceVersion"),
                    }
                },
            )
        volume_pending = retention.protect_volume(self.ctx, instance)
        self._delete(instance, rest)
        if held or volume_pending or rest:
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.PENDING,
                Reason.RELEASING,
                "The VM, its data disk and volume, and the Secrets they need are being "
                "released from the instance.",
                requeue_after=1,
            )
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.SATISFIED,
            Reason.RELEASED,
            "The VM, its data disk and volume, the cloud-init and admin Secrets are kept, "
            "released from the instance.",
        )


class TeardownFinalizer(Activity):
    STEP, CONDITION = "teardown_finalizer", "FinalizerRemoved"

    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        instance = load(self.ctx, step_input)
        if instance is None or names.FINALIZER not in instance.finalizers:
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.SATISFIED,
                Reason.FINALIZER_REMOVED,
                "The finalizer is removed.",
            )
        remaining = [f for f in instance.finalizers if f != names.FINALIZER]
        self.ctx.kube.objects.patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            instance.namespace,
            names.PLURAL,
            instance.name,
            {
                "metadata": {
                    "finalizers": remaining,
                    "resourceVersion": instance.model.metadata["resourceVersion"],
                }
            },
        )
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.SATISFIED,
            Reason.FINALIZER_REMOVED,
            "The finalizer is removed.",
        )
