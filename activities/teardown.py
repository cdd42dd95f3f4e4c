"""The teardown pipeline, run once the DBInstance is being deleted.

teardown_monitoring removes the metrics objects; teardown_vm deletes the VM and its
data disk (``deletionPolicy: Delete``) or releases them, with the cloud-init and admin
Secrets the VM needs to boot and be managed, by removing our owner references
(``Retain``); teardown_finalizer removes the finalizer last, and the
instance is gone. Each is Pending until what it asked for is observed done.
"""

from __future__ import annotations

from enum import StrEnum

from kubernetes import client as k8s
from temporalio import activity

from activities import manifests, monitoring, secrets
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
        """Remove our owner references from the VM, its disk, and the Secrets it boots
        and is managed with (cloud-init, admin), so the garbage collector keeps them."""
        kube, ns = self.ctx.kube, instance.namespace
        owned: list[tuple[str, str]] = []
        if vm is not None and _owned(vm.get("metadata"), instance.uid):
            owned.append(("vm", instance.name))
        if claim is not None and _owned(
            kube.api.sanitize_for_serialization(claim.metadata), instance.uid
        ):
            owned.append(("pvc", manifests.data_claim_name(instance)))
        for name in (secrets.cloudinit_name(instance), secrets.admin_name(instance)):
            found = kube.secret(ns, name)
            if found is not None and _owned(
                kube.api.sanitize_for_serialization(found.metadata), instance.uid
            ):
                owned.append(("secret", name))
        if not owned:
            return result(
                self.STEP,
                self.CONDITION,
                Outcome.SATISFIED,
                Reason.RELEASED,
                "The VM, its data disk, cloud-init and admin Secrets are kept, released.",
            )
        for kind, name in owned:
            self._release_one(ns, kind, name)
        return result(
            self.STEP,
            self.CONDITION,
            Outcome.PENDING,
            Reason.RELEASING,
            "The VM and what it needs are being released from the instance.",
            requeue_after=1,
        )

    def _release_one(self, namespace: str, kind: str, name: str) -> None:
        kube, release = self.ctx.kube, {"metadata": {"ownerReferences": None}}
        if kind == "vm":
            kube.objects.patch_namespaced_custom_object(
                *KUBEVIRT, namespace, "virtualmachines", name, release
            )
        elif kind == "pvc":
            kube.core.patch_namespaced_persistent_volume_claim(name, namespace, release)
        else:
            kube.core.patch_namespaced_secret(name, namespace, release)


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
