"""vm (VMProvisioned): the KubeVirt VirtualMachine and its disks.

Observes the VM; creates it (and its disks: a root disk from the image, a blank data
disk, ``activities.infra.manifests``) when missing, or
re-applies it when a field we own drifted (someone edited the CPU by hand), with
server-side apply: fields other managers own are left alone. A VM or claim of that
name that is not the instance's stops the step (``activities.infra.ownership``). The VM has
an owner reference to the instance only under ``deletionPolicy: Delete``. Pending
after a write, Satisfied when the VM matches. Idempotency key: the names (the VM is
the instance's, the claims ``<name>-data`` and ``<name>-root-<hash of the image>``), so a
retried create after a worker crash applies the same objects again and cannot leak a
second VM. ``runStrategy`` belongs to the power step and the root disk a VM boots to
the repave step: an apply carries their current values. A VM created where a one-disk
instance's data claim is (one made from an image: a retained disk adopted, a VM
deleted by hand) is a one-disk VM again, booting that disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import manifests, ownership
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.infra.machine import create_root, desired_vm, image_for
from activities.steps.loop import Anatomy
from dbi.pipeline import VM as SPEC
from dbi.steps import AT_ONCE, Decision, StepInput


class Reason(StrEnum):
    PROVISIONED = SPEC.condition_type
    CREATED = "VMCreated"
    UPDATED = "VMUpdated"


class Action(StrEnum):
    CREATE = "create"  # the VM, and the claims there are none of
    APPLY = "apply"  # the VM's fields we own


@dataclass(frozen=True, kw_only=True)
class Observation:
    desired: Manifest  # the VM to apply: the spec's, with what is not ours as observed
    observed: Manifest | None
    uid: str  # the instance's: its owner reference counts both ways
    claim_exists: bool = True
    root_exists: bool = True
    children: tuple[ownership.Child, ...] = ()


def _owner_uids(manifest: Manifest) -> set[str]:
    refs = manifest.get("metadata", {}).get("ownerReferences") or []
    return {r.get("uid", "") for r in refs}


def decide(obs: Observation) -> Decision[Action]:
    """Compare the wanted VM with the one observed (pure); runStrategy is not ours. An
    owner reference to the instance counts both ways: the VM has one exactly when
    deletionPolicy is Delete."""
    desired, observed = obs.desired, obs.observed
    if observed is None:
        message = "The VirtualMachine was created."
        return SPEC.pending(Reason.CREATED, message, Action.CREATE, after=AT_ONCE)
    wanted = {**desired, "spec": {k: v for k, v in desired["spec"].items() if k != "runStrategy"}}
    owned = obs.uid in _owner_uids(observed)
    if not manifests.covers(wanted, observed) or owned != (obs.uid in _owner_uids(desired)):
        message = "The VirtualMachine drifted and was corrected."
        return SPEC.pending(Reason.UPDATED, message, Action.APPLY, after=AT_ONCE)
    message = "The VirtualMachine matches the spec."
    return SPEC.satisfied(Reason.PROVISIONED, message)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube = ctx.kube
    observed = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
    children = [ownership.Child("VirtualMachine", instance.name, ownership.meta_of(observed, kube))]
    if observed is not None:
        return Observation(
            desired=desired_vm(instance, observed, root_claim=manifests.root_of(observed)),
            observed=observed,
            uid=instance.uid,
            children=tuple(children),
        )
    # About to create: the disks' names must be free or ours too.
    name = manifests.data_claim_name(instance)
    data = kube.pvc(instance.namespace, name)
    meta = ownership.meta_of(data, kube)
    children.append(ownership.Child("PersistentVolumeClaim", name, meta))
    root, root_exists = None, True
    if manifests.image_of({"metadata": meta}) is None:  # none, or a blank data disk
        root = manifests.root_claim_name(
            instance.name, image_for(instance, ctx.config.images) or ""
        )
        root_meta = ownership.meta_of(kube.pvc(instance.namespace, root), kube)
        children.append(ownership.Child("PersistentVolumeClaim", root, root_meta))
        root_exists = root_meta is not None
    return Observation(
        desired=desired_vm(instance, None, root_claim=root),
        observed=None,
        uid=instance.uid,
        claim_exists=meta is not None,
        root_exists=root_exists,
        children=tuple(children),
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    if action is Action.CREATE:
        if not obs.claim_exists:
            major = str(int(instance.model.spec.version))
            ctx.kube.apply_pvc(manifests.data_claim(instance, data_major=major))
        if not obs.root_exists:
            create_root(ctx, instance, image_for(instance, ctx.config.images) or "")
    ctx.kube.apply_custom(*KUBEVIRT, "virtualmachines", obs.desired)


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
