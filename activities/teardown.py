"""The teardown pipeline, run once the DBInstance is being deleted.

teardown_monitoring removes the metrics objects; teardown_vm deletes the VM and its
data disk (``deletionPolicy: Delete``) or releases them by removing our owner
references (``Retain``); teardown_finalizer removes the finalizer last, and the
instance is gone. Each is Pending until what it asked for is observed done.
"""

from __future__ import annotations

from enum import StrEnum

from kubernetes import client as k8s
from temporalio import activity

from activities import manifests, monitoring
from activities.context import Activity, gone, load, result
from activities.kube import KUBEVIRT, Instance, Manifest
from dbi import names
from dbi.models import DeletionPolicy
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
        if obs.service_exists or obs.monitor_exists:
            monitoring.delete_all(self.ctx, instance)
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


def _owned(meta: Manifest | None, uid: str) -> bool:
    refs: list[Manifest] = (meta or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid for r in refs)


class TeardownVM(Activity):
    STEP, CONDITION = "teardown_vm", "VMReleased"

    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        instance = load(self.ctx, step_input)
        if instance is None:
            return gone(self.STEP, self.CONDITION)
        kube = self.ctx.kube
        vm = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
        claim = kube.pvc(instance.namespace, manifests.data_claim_name(instance))
        if instance.model.spec.deletion_policy is DeletionPolicy.RETAIN:
            return self._release(instance, vm, claim)
        if vm is None and claim is None:
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.SATISFIED,
                Reason.DELETED,
                "The VM and its data disk are deleted.",
            )
        if vm is not None:
            kube.objects.delete_namespaced_custom_object(
                *KUBEVIRT, instance.namespace, "virtualmachines", instance.name
            )
        if claim is not None:
            kube.core.delete_namespaced_persistent_volume_claim(
                manifests.data_claim_name(instance), instance.namespace
            )
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.PENDING,
            Reason.DELETING,
            "The VM and its data disk are being deleted.",
            requeue_after=1,
        )

    def _release(
        self,
        instance: Instance,
        vm: Manifest | None,
        claim: k8s.V1PersistentVolumeClaim | None,
    ) -> StepResult:
        kube = self.ctx.kube
        claim_meta = kube.api.sanitize_for_serialization(claim.metadata) if claim else None
        vm_meta = vm.get("metadata") if vm else None
        if not _owned(vm_meta, instance.uid) and not _owned(claim_meta, instance.uid):
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.SATISFIED,
                Reason.RELEASED,
                "The VM and its data disk are kept, released from the instance.",
            )
        release = {"metadata": {"ownerReferences": None}}
        if vm is not None:
            kube.objects.patch_namespaced_custom_object(
                *KUBEVIRT, instance.namespace, "virtualmachines", instance.name, release
            )
        if claim is not None:
            kube.core.patch_namespaced_persistent_volume_claim(
                manifests.data_claim_name(instance), instance.namespace, release
            )
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.PENDING,
            Reason.RELEASING,
            "The VM and its data disk are being released.",
            requeue_after=1,
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
