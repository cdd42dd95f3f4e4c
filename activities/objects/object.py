"""A DBDatabase or DBRole as the worker reads and writes it: its load, its finalizer,
its status (``dbi.objects.KINDS`` says which plural and model each kind has).

``load_object`` tells the workflow whether its object exists and whether it is being
deleted; ``write_object_status`` merges a pass into the object's status (patched only
when it changed, so an idle pass writes nothing) and records an Event for each condition
that changed, as ``write_status`` does for an instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio import activity

from activities.infra.context import Activity
from activities.infra.events import emit
from activities.infra.kube import Kube, Manifest
from dbi import names, pipeline
from dbi.objects import KINDS, Loaded, ObjectKind, ObjectPass, ObjectRef, ObjectStatus
from dbi.spec import PowerState
from dbi.status import PassReport, conditions_of

API = (names.GROUP, names.VERSION)


S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True)
class Declared:
    """An object of ``kind`` as read from the API server: its spec (None when this
    worker's model cannot read it: ``unreadable`` says why) and identity."""

    kind: ObjectKind
    raw: Manifest
    spec: BaseModel | None
    unreadable: str | None = None

    def spec_as(self, model: type[S]) -> S:
        """The spec, as the model of this kind (a step runs only on a readable one)."""
        assert isinstance(self.spec, model), self.unreadable
        return self.spec

    @property
    def meta(self) -> dict[str, Any]:
        return dict(self.raw["metadata"])

    @property
    def name(self) -> str:
        return str(self.meta["name"])

    @property
    def namespace(self) -> str:
        return str(self.meta["namespace"])

    @property
    def uid(self) -> str:
        return str(self.meta["uid"])

    @property
    def generation(self) -> int:
        return int(self.meta.get("generation", 0))

    @property
    def deleting(self) -> bool:
        return bool(self.meta.get("deletionTimestamp"))

    @property
    def finalizers(self) -> tuple[str, ...]:
        return tuple(self.meta.get("finalizers") or ())


def read(kube: Kube, ref: ObjectRef) -> Declared | None:
    """Read the object ``ref`` names; None when it is gone or is another object of the
    same name (another UID)."""
    kind = KINDS[ref.kind]
    raw = kube.get_custom(*API, ref.namespace, kind.plural, ref.name)
    if raw is None or (ref.uid and raw["metadata"]["uid"] != ref.uid):
        return None
    try:
        return Declared(kind, raw, kind.spec.model_validate(raw.get("spec") or {}))
    except ValidationError as e:
        fields = ", ".join("spec." + ".".join(map(str, err["loc"])) for err in e.errors())
        return Declared(kind, raw, None, unreadable=fields)


def set_finalizers(kube: Kube, declared: Declared, finalizers: list[str]) -> None:
    """Write the object's finalizers; the resourceVersion makes it fail (409) rather than
    drop a finalizer someone else added since it was read."""
    kube.objects.patch_namespaced_custom_object(
        *API,
        declared.namespace,
        declared.kind.plural,
        declared.name,
        {
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": declared.meta["resourceVersion"],
            }
        },
    )


class LoadObject(Activity):
    @activity.defn(name=pipeline.LOAD_OBJECT)
    def run(self, ref: ObjectRef) -> Loaded:
        """Read the object: whether it exists, its UID, generation and deletion."""
        found = read(self.ctx.kube, ref)
        if found is None:
            return Loaded(exists=False)
        return Loaded(
            exists=True, uid=found.uid, generation=found.generation, deleting=found.deleting
        )


class WriteObjectStatus(Activity):
    @activity.defn(name=pipeline.WRITE_OBJECT_STATUS)
    def run(self, done: ObjectPass) -> None:
        """Merge one pass into the object's status; patch only what changed."""
        found = read(self.ctx.kube, done.ref)
        if found is None:
            return
        previous = ObjectStatus.model_validate(found.raw.get("status") or {})
        steps = found.kind.teardown if done.deleting else found.kind.steps
        report = PassReport(
            workflow_id=done.workflow_id,
            generation=done.generation,
            power_state=PowerState.RUNNING,
            deleting=done.deleting,
            pipeline=[s.reported for s in steps],
            results=done.results,
        )
        now = datetime.now(UTC)
        conditions, events = conditions_of(
            previous.conditions, report, now=now, what=found.kind.kind
        )
        status = ObjectStatus(
            observed_generation=done.generation,
            conditions=conditions,
            workflow_id=done.workflow_id,
        )
        if status != previous:
            self.ctx.kube.patch_custom_status(
                *API,
                found.kind.plural,
                found.namespace,
                found.name,
                status.model_dump(mode="json", exclude_none=True),
            )
        for event in events:
            emit(self.ctx.kube, found, event, now, kind=found.kind.kind)
