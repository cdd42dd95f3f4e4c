"""teardown_vm (VMReleased): the VM and its disk go, or stay released, as deletionPolicy says.

Observes the instance's own VM, data claim, root disk claims, cloud-init and credentials
Secrets, its admin credential (in dbi's namespace) and its volume;
objects that are not the instance's are neither observed nor touched
(``activities.infra.ownership``), and the garbage collector is not leaned on, whatever
cascade the deletion asked for.

- ``Delete``: deletes every one of them, Pending until all are gone.
- ``Retain``: takes the instance's owner reference off the VM, the claims and the
  cloud-init Secret (marking them with the instance's UID, as new children are), sets
  the claim's volume to ``reclaimPolicy: Retain``, keeps the admin credential (an
  instance that adopts the data needs it) and deletes the credentials Secret; Pending
  until that holds.

Idempotency key: the names; a release patch names the resourceVersion it read, and
deleting what is already gone is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import admin_credential, manifests, ownership, secrets, volumes
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance
from activities.steps.loop import Anatomy
from dbi import names
from dbi.pipeline import TEARDOWN_VM as SPEC
from dbi.steps import Decision, StepInput

CHECK_SECONDS = 1.0
OURS = ownership.Claim.OURS


class Reason(StrEnum):
    DELETED = "Deleted"
    DELETING = "Deleting"
    RELEASED = "Released"
    RELEASING = "Releasing"


class Action(StrEnum):
    DELETE = "delete"
    RELEASE = "release"


@dataclass(frozen=True, kw_only=True)
class Observation:
    uid: str  # the instance's
    retain: bool
    kept: tuple[ownership.Child, ...]  # the instance's own of what Retain keeps
    rest: tuple[ownership.Child, ...]  # the instance's own others (the credentials Secret)
    credential: tuple[ownership.Child, ...] = ()  # its admin credential, if there
    volume_protected: bool = True  # its claim's volume is Retain and marked (or unbound)

    def held(self) -> list[ownership.Child]:
        """What Retain keeps that still carries the instance's owner reference."""
        return [c for c in self.kept if c.owned_by(self.uid)]


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube, ns = ctx.kube, instance.namespace
    vm = kube.get_custom(*KUBEVIRT, ns, "virtualmachines", instance.name)
    claim_name = manifests.data_claim_name(instance)

    def secret(name: str) -> ownership.Child:
        return ownership.Child("Secret", name, ownership.meta_of(kube.secret(ns, name), kube))

    kept = [
        ownership.Child("VirtualMachine", instance.name, ownership.meta_of(vm, kube)),
        ownership.Child(
            "PersistentVolumeClaim", claim_name, ownership.meta_of(kube.pvc(ns, claim_name), kube)
        ),
        secret(secrets.cloudinit_name(instance)),
    ]
    roots = kube.pvcs(
        ns, {names.INSTANCE_LABEL: instance.name, manifests.DISK_LABEL: manifests.ROOT}
    )
    kept += [
        ownership.Child("PersistentVolumeClaim", str(c.metadata.name), ownership.meta_of(c, kube))
        for c in roots
        if c.metadata is not None
    ]
    rest = [secret(secrets.app_name(instance))]
    home, name = ctx.config.namespace, admin_credential.name_for(instance.uid)
    credential = (
        [] if kube.secret(home, name) is None else [ownership.Child("Secret", name, {}, home)]
    )
    protected = volumes.read(ctx, instance).protected
    return Observation(
        uid=instance.uid,
        retain=instance.retains,
        kept=tuple(c for c in kept if ownership.classify(c, instance.uid) is OURS),
        rest=tuple(c for c in rest if ownership.classify(c, instance.uid) is OURS),
        credential=tuple(credential),
        volume_protected=protected,
    )


def decide(obs: Observation) -> Decision[Action]:
    """Delete everything of the instance's (Delete), or release what Retain keeps and
    delete the rest (Retain) (pure)."""

    if not obs.retain:
        if obs.kept or obs.rest or obs.credential:
            message = "The VM, its data disk and the instance's Secrets are being deleted."
            return SPEC.pending(Reason.DELETING, message, Action.DELETE, after=CHECK_SECONDS)
        message = "The VM, its data disk, its Secrets and admin credential are deleted."
        return SPEC.satisfied(Reason.DELETED, message)
    if obs.held() or obs.rest or not obs.volume_protected:
        message = (
            "The VM, its data disk and volume, and the Secrets they need are being "
            "released from the instance."
        )
        return SPEC.pending(Reason.RELEASING, message, Action.RELEASE, after=CHECK_SECONDS)
    message = (
        "The VM, its data disk and volume, and the cloud-init Secret are kept, released "
        "from the instance; dbi keeps its admin credential."
    )
    return SPEC.satisfied(Reason.RELEASED, message)


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    kube = ctx.kube
    if action is Action.DELETE:
        for child in (*obs.kept, *obs.rest, *obs.credential):
            if not (child.meta or {}).get("deletionTimestamp"):
                kube.delete(child.kind, child.namespace or instance.namespace, child.name)
        return
    for child in obs.held():
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
    volumes.protect(ctx, instance)
    for child in obs.rest:
        kube.delete(child.kind, instance.namespace, child.name)


STEP = Anatomy(SPEC, observe, decide, act)
