"""A stored DBInstance as this version's models read it, and what a workflow needs of it.

``read`` is how the worker reads an instance (``activities.infra.kube.Kube.instance``);
``snapshot`` is what a pass's load tells the workflow (``InstanceSnapshot``), and
``seen`` the same of an object a watch delivered: the watcher builds it, and a wake
carries it (``Wake.seen``), so the pass the wake brings may expect it and run with its
load. Both go through ``snapshot``: a pass expects what its own load would find.

Pure functions of the object, tested with plain data.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from dbi import names
from dbi.fields import duration_seconds
from dbi.models import DBInstance, DBInstanceStatus, Served
from dbi.spec import SUPPORTED_VERSIONS, DBInstanceSpec, DeletionPolicy
from dbi.steps import InstanceSnapshot

Manifest = dict[str, Any]

# The day-2 requests a DBInstance's annotations make, by the status.served field that
# records each one's value once served.
REQUESTS = {
    "reconcile_requested_at": names.RECONCILE_REQUESTED_AT,
    "restart_requested_at": names.RESTART_REQUESTED_AT,
    "rotate_requested_at": names.ROTATE_REQUESTED_AT,
    "rotate_admin_requested_at": names.ROTATE_ADMIN_REQUESTED_AT,
    "backup_requested_at": names.BACKUP_REQUESTED_AT,
    "switchover_requested_at": names.SWITCHOVER_REQUESTED_AT,
}

# What a teardown goes by when the stored spec cannot be read: its deletionPolicy if
# that field alone reads, else Retain (never delete a disk on a guess).
_STAND_IN_SPEC: dict[str, Any] = {
    "version": SUPPORTED_VERSIONS[-1],
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
}


def read(raw: Manifest) -> tuple[DBInstance, str | None]:
    """The stored DBInstance as this worker's models read it, and None; or, when they
    cannot read its spec, a model with a stand-in spec and why, naming each field. A
    status they cannot read (a newer worker wrote it) reads as empty: the next status
    write replaces it."""
    try:
        return DBInstance.model_validate(raw), None
    except ValidationError:
        pass
    spec, why = raw.get("spec") or {}, None
    try:
        DBInstanceSpec.model_validate(spec)
    except ValidationError as e:
        why = _fields(e, "spec")
        policy = spec.get("deletionPolicy") if isinstance(spec, dict) else None
        kept = policy if policy in {p.value for p in DeletionPolicy} else DeletionPolicy.RETAIN
        spec = {**_STAND_IN_SPEC, "deletionPolicy": kept}
    status = raw.get("status") or {}
    try:
        DBInstanceStatus.model_validate(status)
    except ValidationError:
        status = {}
    return DBInstance.model_validate({**raw, "spec": spec, "status": status}), why


def _fields(error: ValidationError, root: str) -> str:
    """The fields a validation error names, with what is wrong with each (no values)."""
    errors = error.errors()
    why = "; ".join(
        ".".join([root, *(str(part) for part in e["loc"])]) + f": {e['msg']}" for e in errors[:3]
    )
    return why + (f"; and {len(errors) - 3} more" if len(errors) > 3 else "")


def annotations_of(model: DBInstance) -> dict[str, str]:
    return dict(model.metadata.get("annotations") or {})


def paused(model: DBInstance) -> bool:
    """Whether dbi.dev/paused holds the instance's actions (the value "true", any case)."""
    return annotations_of(model).get(names.PAUSED_ANNOTATION, "").strip().lower() == "true"


def unserved(model: DBInstance) -> Served:
    """The requests whose annotation value is set and differs from the one served."""
    served = model.status.served or Served()
    asked = annotations_of(model)
    return Served.model_validate(
        {
            field: value
            for field, key in REQUESTS.items()
            if (value := asked.get(key)) and value != getattr(served, field)
        }
    )


def snapshot(model: DBInstance, *, uid: str, generation: int, deleting: bool) -> InstanceSnapshot:
    """What a pass's load tells the workflow of the instance ``model`` reads."""
    spec = model.spec
    return InstanceSnapshot(
        exists=True,
        uid=uid,
        generation=generation,
        deleting=deleting,
        power_state=spec.power_state,
        health_check_interval_seconds=duration_seconds(spec.health_check_interval),
        paused=paused(model),
        instances=spec.instances,
        unserved=unserved(model),
    )


def identity(raw: Manifest) -> tuple[str, int, bool]:
    """A stored object's UID, generation and whether its deletion has begun."""
    meta = raw["metadata"]
    return meta["uid"], int(meta.get("generation", 0)), bool(meta.get("deletionTimestamp"))


def seen(raw: Manifest) -> InstanceSnapshot:
    """``snapshot`` of an object as a watch delivered it."""
    uid, generation, deleting = identity(raw)
    return snapshot(read(raw)[0], uid=uid, generation=generation, deleting=deleting)
