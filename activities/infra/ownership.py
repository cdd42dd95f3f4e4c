"""Which object with a child's name is this instance's: dbi changes and deletes only those.

Every child dbi creates carries the label ``dbi.dev/instance: <name>`` and the
annotation ``dbi.dev/instance-uid: <uid>``; it also carries an owner reference to the
instance unless it is one that ``deletionPolicy: Retain`` keeps (then the garbage
collector has nothing to follow, whatever the cascade). An object found under a
child's name is, for an instance:

- absent;
- ours: its owner reference or its UID annotation names the instance;
- left behind: a deleted DBInstance owns it, or it is being deleted; the garbage
  collector (or whoever deletes it) takes it soon, so the step waits (an owner that
  exists, another instance, makes it foreign instead: ``live_owner``);
- retained: kept by a deleted instance of the same name (its UID annotation names
  another instance, and nothing owns it); taken over only when the instance's
  ``dbi.dev/adopt`` annotation names that UID, so that reusing a name with a retained
  disk is a decision, never an accident;
- foreign: anything else (a user's own Secret, another controller's VM); never
  changed, the step is Terminal and names it.

``classify`` is pure; a step observes the objects it reads anyway and names them
(``Anatomy.children``); the shared loop (``activities.steps.loop``) turns the first that is
not absent or ours into the step's decision (``refusal_of``) and adopts it if so.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubernetes import client as k8s

from activities.infra.kube import Instance, Kube, Manifest, or_none
from dbi import names
from dbi.pipeline import StepSpec
from dbi.steps import AT_ONCE, Decision

LEFT_BEHIND_WAIT_SECONDS = 2.0


class Claim(StrEnum):
    ABSENT = "absent"
    OURS = "ours"
    LEFT_BEHIND = "left-behind"
    RETAINED = "retained"
    FOREIGN = "foreign"


class Reason(StrEnum):
    """The reasons any step that observes a child may give about its ownership."""

    FOREIGN = "ForeignObject"
    RETAINED = "RetainedObject"
    LEFT_BEHIND = "ObjectBeingDeleted"
    ADOPTED = "Adopted"


# What of a child's metadata the ownership check reads: never the rest (a Secret's
# kubectl.kubernetes.io/last-applied-configuration holds its data).
KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")


@dataclass(frozen=True)
class Child:
    """An object with one of the instance's child names, as read (``meta`` None: absent):
    its name, UID, resourceVersion, deletion, owner references and dbi's annotations."""

    kind: str
    name: str
    meta: Manifest | None
    namespace: str | None = None  # None: the instance's

    def __post_init__(self) -> None:
        if self.meta is None:
            return
        kept = {k: self.meta[k] for k in KEPT_METADATA if k in self.meta}
        kept["ownerReferences"] = list(self.meta.get("ownerReferences") or [])
        annotations = self.meta.get("annotations") or {}
        kept["annotations"] = {
            k: v for k, v in annotations.items() if k.startswith(f"{names.GROUP}/")
        }
        object.__setattr__(self, "meta", kept)

    @property
    def instance_uid(self) -> str | None:
        """The UID of the instance the object says it belongs to, if it says one."""
        annotations = (self.meta or {}).get("annotations") or {}
        return annotations.get(names.INSTANCE_UID_ANNOTATION)

    def owners(self) -> list[Manifest]:
        return list((self.meta or {}).get("ownerReferences") or [])

    def owned_by(self, uid: str) -> bool:
        """Whether the object carries an owner reference to ``uid``."""
        return any(r.get("uid") == uid for r in self.owners())


def meta_of(obj: Any, kube: Kube) -> Manifest | None:
    """Return an object's metadata as a dict (from a typed client object or a manifest)."""
    if obj is None:
        return None
    if isinstance(obj, dict):
        return dict(obj.get("metadata") or {})
    return dict(kube.api.sanitize_for_serialization(obj.metadata) or {})


def classify(child: Child, uid: str) -> Claim:
    """Return what the object under a child's name is to the instance with ``uid`` (pure)."""
    if child.meta is None:
        return Claim.ABSENT
    if child.owned_by(uid) or child.instance_uid == uid:
        return Claim.OURS
    if child.meta.get("deletionTimestamp"):
        return Claim.LEFT_BEHIND
    if any(
        r.get("kind") == names.KIND and r.get("apiVersion", "").startswith(names.GROUP + "/")
        for r in child.owners()
    ):
        return Claim.LEFT_BEHIND  # its DBInstance is gone: the garbage collector takes it
    if child.instance_uid and not child.owners():
        return Claim.RETAINED
    return Claim.FOREIGN


def first_not_ours(children: list[Child], uid: str) -> tuple[Child, Claim] | None:
    """Return the first object that is neither absent nor the instance's, with its claim."""
    for child in children:
        claim = classify(child, uid)
        if claim not in (Claim.ABSENT, Claim.OURS):
            return child, claim
    return None


def refusal(
    spec: StepSpec,
    instance: Instance,
    child: Child,
    claim: Claim,
    *,
    live_owner: str | None = None,
) -> Decision[Child]:
    """Return the step's decision for an object that is not the instance's: to adopt it
    (a retained object the ``dbi.dev/adopt`` annotation names: the action is the child),
    or to stop (foreign, retained and not named, or owned by ``live_owner``, another
    DBInstance that exists) or wait (left behind) (pure)."""
    what = f"{child.kind} {child.name}"
    if live_owner is not None:
        return spec.terminal(
            Reason.FOREIGN,
            f"{what} belongs to the DBInstance {live_owner}, which exists; dbi leaves it "
            "untouched. Rename one of the two, or give one another Secret name.",
        )
    if claim is Claim.LEFT_BEHIND:
        return spec.pending(
            Reason.LEFT_BEHIND,
            f"{what} belongs to a deleted instance or is being deleted; waiting for it to go.",
            after=LEFT_BEHIND_WAIT_SECONDS,
        )
    if claim is Claim.RETAINED:
        old = child.instance_uid or ""
        if instance.adopts == old:
            message = (
                f"{what}, retained from the deleted instance {old}, was adopted with its data."
            )
            return spec.pending(Reason.ADOPTED, message, child, after=AT_ONCE)
        return spec.terminal(
            Reason.RETAINED,
            f"{what} was retained from a deleted instance of this name (uid {old}). To take "
            f"it over with its data, annotate this DBInstance {names.ADOPT_ANNOTATION}={old};"
            f" to start empty, delete {what}.",
        )
    return spec.terminal(
        Reason.FOREIGN,
        f"{what} exists and was not created by this instance; dbi leaves it untouched. "
        "Rename the instance, or move that object away.",
    )


def refusal_of(
    kube: Kube, spec: StepSpec, instance: Instance, children: list[Child]
) -> Decision[Child] | None:
    """Return the step's decision when one of ``children`` is not the instance's; None
    when each is absent or the instance's. An object a DBInstance owns reads as left
    behind unless that DBInstance exists (one read, only then)."""
    found = first_not_ours(children, instance.uid)
    if found is None:
        return None
    child, claim = found
    owner = live_owner(kube, instance.namespace, child) if claim is Claim.LEFT_BEHIND else None
    return refusal(spec, instance, child, claim, live_owner=owner)


def live_owner(kube: Kube, namespace: str, child: Child) -> str | None:
    """The name of a DBInstance other than this one that owns ``child`` and exists (the
    owner reference's name and UID), if one does."""
    for ref in child.owners():
        if (
            ref.get("kind") != names.KIND
            or child.meta is None
            or child.meta.get("deletionTimestamp")
        ):
            continue
        found = kube.instance(child.namespace or namespace, str(ref.get("name")))
        if found is not None and found.uid == ref.get("uid"):
            return found.name
    return None


def adopt(kube: Kube, instance: Instance, child: Child) -> None:
    """Mark a retained object as the instance's: its UID annotation, changed only if it
    still names the UID that was adopted (a JSON patch ``test``), so a concurrent change
    makes the patch fail instead of taking something else over."""
    key = names.INSTANCE_UID_ANNOTATION.replace("~", "~0").replace("/", "~1")
    path = f"/metadata/annotations/{key}"
    body = [
        {"op": "test", "path": path, "value": child.instance_uid},
        {"op": "replace", "path": path, "value": instance.uid},
    ]
    kube.patch(child.kind, instance.namespace, child.name, body)


def volume_of(
    kube: Kube, claim: k8s.V1PersistentVolumeClaim | None
) -> k8s.V1PersistentVolume | None:
    """Return the PersistentVolume ``claim`` is bound to: the one its ``spec.volumeName``
    names, if that volume's ``claimRef`` names the claim back (namespace, name and UID).

    A claim's ``volumeName`` is written by whoever writes the claim (a tenant, too); a
    volume's ``claimRef`` only by the binder or a cluster administrator. A claim naming a
    volume that is not bound to it gets nothing: dbi never reads, marks or relies on
    another claim's volume on its say-so."""
    meta = claim.metadata if claim is not None else None
    wanted = claim.spec.volume_name if claim is not None and claim.spec else None
    if meta is None or not wanted:
        return None
    volume = or_none(lambda: kube.core.read_persistent_volume(wanted))
    ref = volume.spec.claim_ref if volume is not None and volume.spec is not None else None
    if ref is None or (ref.namespace, ref.name, ref.uid) != (meta.namespace, meta.name, meta.uid):
        return None
    return volume


def follows_policy(child: Child, instance: Instance) -> bool:
    """Whether a kept child's owner reference is as deletionPolicy wants it: none under
    Retain (the garbage collector must not take it), the instance's under Delete."""
    return child.meta is None or child.owned_by(instance.uid) != instance.retains
