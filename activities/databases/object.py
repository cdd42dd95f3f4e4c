"""A DBDatabase as the worker reads and writes it: its load, its finalizer, its status.

``load_database`` tells the workflow whether its object exists and whether it is being
deleted; ``write_database_status`` merges a pass into the object's status (patched only
when it changed, so an idle pass writes nothing) and records an Event for each condition
that changed, as ``write_status`` does for an instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from temporalio import activity

from activities.infra.context import Activity
from activities.infra.events import emit
from activities.infra.kube import Kube, Manifest
from dbi import names, pipeline
from dbi.databases import DatabasePass, DBDatabaseSpec, DBDatabaseStatus, Loaded, ObjectRef
from dbi.spec import PowerState
from dbi.status import PassReport, conditions_of

API = (names.GROUP, names.VERSION)


@dataclass(frozen=True)
class Database:
    """A DBDatabase as read from the API server: its spec (None when this worker's
    model cannot read it: ``unreadable`` says why) and identity."""

    raw: Manifest
    spec: DBDatabaseSpec | None
    unreadable: str | None = None

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


def read(kube: Kube, ref: ObjectRef) -> Database | None:
    """Read the DBDatabase ``ref`` names; None when it is gone or is another object of
    the same name (another UID)."""
    raw = kube.get_custom(*API, ref.namespace, names.DATABASE_PLURAL, ref.name)
    if raw is None or (ref.uid and raw["metadata"]["uid"] != ref.uid):
        return None
    try:
        return Database(raw, DBDatabaseSpec.model_validate(raw.get("spec") or {}))
    except ValidationError as e:
        fields = ", ".join("spec." + ".".join(map(str, err["loc"])) for err in e.errors())
        return Database(raw, None, unreadable=fields)


def set_finalizers(kube: Kube, database: Database, finalizers: list[str]) -> None:
    """Write the object's finalizers; the resourceVersion makes it fail (409) rather than
    drop a finalizer someone else added since it was read."""
    kube.objects.patch_namespaced_custom_object(
        *API,
        database.namespace,
        names.DATABASE_PLURAL,
        database.name,
        {
            "metadata": {
                "finalizers": finalizers,
                "resourceVersion": database.meta["resourceVersion"],
            }
        },
    )


class LoadDatabase(Activity):
    @activity.defn(name=pipeline.LOAD_DATABASE)
    def run(self, ref: ObjectRef) -> Loaded:
        """Read the DBDatabase: whether it exists, its UID, generation and deletion."""
        found = read(self.ctx.kube, ref)
        if found is None:
            return Loaded(exists=False)
        return Loaded(
            exists=True, uid=found.uid, generation=found.generation, deleting=found.deleting
        )


class WriteDatabaseStatus(Activity):
    @activity.defn(name=pipeline.WRITE_DATABASE_STATUS)
    def run(self, done: DatabasePass) -> None:
        """Merge one pass into the object's status; patch only what changed."""
        found = read(self.ctx.kube, done.ref)
        if found is None:
            return
        previous = DBDatabaseStatus.model_validate(found.raw.get("status") or {})
        steps = pipeline.DATABASE_TEARDOWN if done.deleting else pipeline.DATABASE
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
            previous.conditions, report, now=now, what=names.DATABASE_KIND
        )
        status = DBDatabaseStatus(
            observed_generation=done.generation,
            conditions=conditions,
            workflow_id=done.workflow_id,
        )
        if status != previous:
            self.ctx.kube.patch_custom_status(
                *API,
                names.DATABASE_PLURAL,
                found.namespace,
                found.name,
                status.model_dump(mode="json", exclude_none=True),
            )
        for event in events:
            emit(self.ctx.kube, found, event, now, kind=names.DATABASE_KIND)
