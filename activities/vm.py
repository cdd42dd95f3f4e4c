"""vm (VMProvisioned): the KubeVirt VirtualMachine and its data disk.

Observes the VM; creates it (and the data PVC from the image) when missing, or
re-applies it when a field we own drifted (someone edited the CPU by hand), with
server-side apply: fields other managers own are left alone. A VM or claim of that
name that is not the instance's stops the step (``activities.ownership``). The VM has
an owner reference to the instance only under ``deletionPolicy: Delete``. Pending after a write,
Satisfied when the VM matches. Idempotent: the names are fixed, so a retried create
after a worker crash applies the same object again and cannot leak a second VM.
``runStrategy`` belongs to the power step: an apply carries its current value.
"""

from __future__ import annotations

from enum import StrEnum

from temporalio import activity

from activities import manifests, ownership
from activities.context import AT_ONCE, Step, result
from activities.kube import KUBEVIRT, Instance, Manifest
from activities.power import desired_strategy
from activities.preflight import image_for
from dbi.quantity import parse_quantity
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "vm", "VMProvisioned"


class Reason(StrEnum):
    PROVISIONED = "VMProvisioned"
    CREATED = "VMCreated"
    UPDATED = "VMUpdated"


def _owner_uids(manifest: Manifest) -> set[str]:
    refs = manifest.get("metadata", {}).get("ownerReferences") or []
    return {r.get("uid", "") for r in refs}


def decide(desired: Manifest, observed: Manifest | None, *, uid: str = "") -> StepResult:
    """Compare the wanted VM with the one observed (pure); runStrategy is not ours. An
    owner reference to the instance (``uid``) counts both ways: the VM has one exactly
    when deletionPolicy is Delete."""
    if observed is None:
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.CREATED,
            "The VirtualMachine was created.",
            requeue_after=AT_ONCE,
        )
    wanted = {**desired, "spec": {k: v for k, v in desired["spec"].items() if k != "runStrategy"}}
    owned = uid in _owner_uids(observed)
    if not manifests.covers(wanted, observed) or owned != (uid in _owner_uids(desired)):
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.UPDATED,
            "The VirtualMachine drifted and was corrected.",
            requeue_after=AT_ONCE,
        )
    return result(
        STEP,
        CONDITION,
        Outcome.SATISFIED,
        Reason.PROVISIONED,
        "The VirtualMachine matches the spec.",
    )


def desired_vm(instance: Instance, observed: Manifest | None) -> Manifest:
    """Return the VM to apply: our fields, with runStrategy and hot-plug limits as observed."""
    spec = (observed or {}).get("spec", {})
    domain = spec.get("template", {}).get("spec", {}).get("domain", {})
    max_guest = domain.get("memory", {}).get("maxGuest")
    return manifests.vm(
        instance,
        run_strategy=spec.get("runStrategy") or desired_strategy(instance),
        max_sockets=domain.get("cpu", {}).get("maxSockets"),
        max_guest_mebibytes=int(parse_quantity(max_guest) // 2**20) if max_guest else None,
    )


class VM(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        kube = self.ctx.kube
        observed = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
        children = [
            ownership.Child("VirtualMachine", instance.name, ownership.meta_of(observed, kube))
        ]
        claim = None
        if observed is None:  # about to create: the disk's name must be free or ours too
            claim = kube.pvc(instance.namespace, manifests.data_claim_name(instance))
            meta = ownership.meta_of(claim, kube)
            children.append(
                ownership.Child("PersistentVolumeClaim", manifests.data_claim_name(instance), meta)
            )
        refused = ownership.gate(kube, STEP, CONDITION, instance, children)
        if refused is not None:
            return refused
        desired = desired_vm(instance, observed)
        decision = decide(desired, observed, uid=instance.uid)
        if decision.reason == Reason.CREATED and claim is None:
            image = image_for(instance, self.ctx.config.images) or ""
            kube.apply_pvc(manifests.data_claim(instance, image=image))
        if decision.outcome is Outcome.PENDING:
            kube.apply_custom(*KUBEVIRT, "virtualmachines", desired)
        return decision
