"""A DBDatabase's steps (``dbi.pipeline.DATABASE``, ``DATABASE_TEARDOWN``), each an
observe, a pure decide and one act (``activities.databases.loop``).

- database_instance (InstanceReady): the spec can be served on its instance (not a
  reserved name, an allowed owner and extensions), the finalizer is on, the instance
  exists in the object's namespace and is Ready. A missing instance is Terminal
  (Stalled, InstanceNotFound); its creation wakes the object.
- database_create (DatabaseReady): the database exists, the ledger proves it this
  object's (``dbi.databases.whose``), its owner is ``spec.owner``. A foreign database of
  the name, or one another DBDatabase holds, is Terminal and never touched.
- database_extensions (ExtensionsReady): each of ``spec.extensions`` is created.
- database_release (DatabaseReleased): Delete drops the database the ledger proves the
  object's, Retain marks it released (kept, for a new object to adopt); a missing
  instance has nothing to drop. Then the finalizer comes off.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from activities.databases import ledger
from activities.databases.loop import Anatomy
from activities.databases.object import Database, set_finalizers
from activities.infra.context import Context
from activities.infra.kube import Instance
from dbi import names
from dbi.config import ADMIN_USER
from dbi.databases import DBDatabaseSpec, Verdict, refusal, whose
from dbi.models import ConditionStatus
from dbi.pipeline import DATABASE_CREATE, DATABASE_EXTENSIONS, DATABASE_INSTANCE, DATABASE_RELEASE
from dbi.steps import AT_ONCE, Decision

INSTANCE_WAIT_SECONDS = 30.0


class Reason(StrEnum):
    INSTANCE_READY = DATABASE_INSTANCE.condition_type
    SPEC_UNREADABLE = "SpecUnreadable"
    FIELD_REFUSED = "FieldRefused"
    FINALIZER_ADDED = "FinalizerAdded"
    INSTANCE_NOT_FOUND = "InstanceNotFound"
    INSTANCE_DELETING = "InstanceDeleting"
    INSTANCE_NOT_READY = "InstanceNotReady"
    DATABASE_READY = DATABASE_CREATE.condition_type
    NO_ADDRESS = "NoAddress"
    OWNER_MISSING = "OwnerMissing"
    OWNER_NOT_ALLOWED = "OwnerNotAllowed"
    FOREIGN = "ForeignDatabase"
    CLAIMED = ledger.CLAIMED
    CREATED = "DatabaseCreated"
    ADOPTED = "DatabaseAdopted"
    OWNER_SET = "OwnerSet"
    EXTENSIONS_READY = DATABASE_EXTENSIONS.condition_type
    EXTENSION_UNAVAILABLE = "ExtensionUnavailable"
    EXTENSIONS_CREATED = "ExtensionsCreated"
    RELEASED = DATABASE_RELEASE.condition_type
    DROPPED = "DatabaseDropped"
    KEPT = "DatabaseKept"


def instance_of(ctx: Context, database: Database) -> Instance | None:
    assert database.spec is not None
    return ctx.kube.instance(database.namespace, database.spec.instance)


def _ready(instance: Instance) -> bool:
    return any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE
        for c in instance.model.status.conditions
    )


def owner_of(spec: DBDatabaseSpec, instance: Instance) -> str:
    return spec.owner or instance.model.spec.credentials.username


# database_instance ----------------------------------------------------------------


@dataclass(frozen=True)
class OnInstance:
    name: str
    spec: DBDatabaseSpec | None
    unreadable: str | None
    refused: tuple[str, str] | None
    finalized: bool
    instance: str
    exists: bool = False
    deleting: bool = False
    ready: bool = False


def observe_instance(ctx: Context, database: Database) -> OnInstance:
    spec = database.spec
    instance = None if spec is None else instance_of(ctx, database)
    own = "" if instance is None else instance.model.spec.credentials.database
    refused = None
    if spec is not None:
        refused = refusal(spec, own_database=own, admin=ADMIN_USER, allowed=ctx.config.extensions)
    return OnInstance(
        name=database.name,
        spec=spec,
        unreadable=database.unreadable,
        refused=refused,
        finalized=names.FINALIZER in database.finalizers,
        instance="" if spec is None else spec.instance,
        exists=instance is not None,
        deleting=instance is not None and instance.deleting,
        ready=instance is not None and _ready(instance),
    )


def decide_instance(o: OnInstance) -> Decision[str]:
    spec = DATABASE_INSTANCE
    if o.unreadable is not None:
        return spec.terminal(Reason.SPEC_UNREADABLE, f"This worker cannot read {o.unreadable}.")
    if o.refused is not None:
        field, why = o.refused
        return spec.terminal(Reason.FIELD_REFUSED, f"{field}: {why}.")
    if not o.finalized:
        message = f"Added {names.FINALIZER}."
        return spec.pending(Reason.FINALIZER_ADDED, message, "finalize", after=AT_ONCE)
    return _on_instance(o)


def _on_instance(o: OnInstance) -> Decision[str]:
    spec = DATABASE_INSTANCE
    if not o.exists:
        message = f"spec.instance: no DBInstance {o.instance} in this namespace (its creation "
        return spec.terminal(Reason.INSTANCE_NOT_FOUND, message + "wakes this object).")
    if o.deleting:
        return spec.terminal(Reason.INSTANCE_DELETING, f"DBInstance {o.instance} is being deleted.")
    if not o.ready:
        message = f"Waiting for DBInstance {o.instance} to be Ready."
        return spec.pending(Reason.INSTANCE_NOT_READY, message, after=INSTANCE_WAIT_SECONDS)
    return spec.satisfied(Reason.INSTANCE_READY, f"DBInstance {o.instance} is Ready.")


def finalize(ctx: Context, database: Database, _o: OnInstance, _action: str) -> None:
    set_finalizers(ctx.kube, database, [*database.finalizers, names.FINALIZER])


INSTANCE = Anatomy(DATABASE_INSTANCE, observe_instance, decide_instance, finalize)


# database_create ------------------------------------------------------------------


@dataclass(frozen=True)
class InInstance:
    name: str
    owner: str
    uid: str
    reachable: bool
    seen: ledger.Seen


def observe_database(ctx: Context, database: Database) -> InInstance:
    spec, instance = database.spec, instance_of(ctx, database)
    assert spec is not None and instance is not None  # database_instance saw them
    owner = owner_of(spec, instance)
    with ledger.admin(ctx, instance) as conn:
        seen = ledger.Seen() if conn is None else ledger.look(conn, spec.name, owner)
    return InInstance(spec.name, owner, database.uid, conn is not None, seen)


def decide_database(o: InInstance) -> Decision[str]:
    spec, seen = DATABASE_CREATE, o.seen
    if not o.reachable:
        return spec.pending(Reason.NO_ADDRESS, "The instance's VM has no address yet.", after=10.0)
    verdict = whose(seen.db_oid, seen.row, o.uid)
    if verdict is Verdict.FOREIGN:
        return spec.terminal(
            Reason.FOREIGN,
            f"spec.name: a database {o.name} exists that dbi did not create; dbi neither "
            "adopts nor drops it. Rename it, or choose another spec.name.",
        )
    if verdict is Verdict.CLAIMED:
        message = f"spec.name: database {o.name} is another DBDatabase's."
        return spec.terminal(Reason.CLAIMED, message)
    if not seen.owner_exists:
        message = f"spec.owner: role {o.owner} does not exist yet."
        return spec.pending(Reason.OWNER_MISSING, message, after=30.0)
    if seen.owner_superuser:
        message = f"spec.owner: role {o.owner} is a superuser."
        return spec.terminal(Reason.OWNER_NOT_ALLOWED, message)
    return _converge_database(o, verdict)


def _converge_database(o: InInstance, verdict: Verdict) -> Decision[str]:
    spec = DATABASE_CREATE
    if verdict is Verdict.MISSING:
        message = f"Created database {o.name}, owned by {o.owner}."
        return spec.pending(Reason.CREATED, message, "create", after=AT_ONCE)
    if verdict is Verdict.ADOPT:
        return spec.pending(Reason.ADOPTED, f"Adopted database {o.name}.", "adopt", after=AT_ONCE)
    if o.seen.db_owner != o.owner:
        message = f"Database {o.name} is now owned by {o.owner}."
        return spec.pending(Reason.OWNER_SET, message, "owner", after=AT_ONCE)
    message = f"Database {o.name} exists, owned by {o.owner}."
    return spec.satisfied(Reason.DATABASE_READY, message)


def act_database(ctx: Context, database: Database, o: InInstance, action: str) -> None:
    instance = instance_of(ctx, database)
    if instance is None:
        return
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return
        if action == "create":
            ledger.create(conn, o.name, o.owner, o.uid)
        elif action == "adopt":
            ledger.record(conn, o.name, o.uid)
        else:
            ledger.set_owner(conn, o.name, o.owner)


CREATE = Anatomy(DATABASE_CREATE, observe_database, decide_database, act_database)


# database_extensions --------------------------------------------------------------


@dataclass(frozen=True)
class Extensions:
    wanted: tuple[str, ...]
    created: frozenset[str] = frozenset()
    available: frozenset[str] = frozenset()
    reachable: bool = True


def observe_extensions(ctx: Context, database: Database) -> Extensions:
    spec, instance = database.spec, instance_of(ctx, database)
    assert spec is not None and instance is not None
    if not spec.extensions:
        return Extensions(())
    with ledger.admin(ctx, instance, dbname=spec.name) as conn:
        if conn is None:
            return Extensions(tuple(spec.extensions), reachable=False)
        created, available = ledger.extensions(conn)
    return Extensions(tuple(spec.extensions), frozenset(created), frozenset(available))


def decide_extensions(o: Extensions) -> Decision[tuple[str, ...]]:
    spec = DATABASE_EXTENSIONS
    if not o.reachable:
        return spec.pending(Reason.NO_ADDRESS, "The instance's VM has no address yet.", after=10.0)
    unavailable = [e for e in o.wanted if e not in o.available]
    if unavailable:
        return spec.terminal(
            Reason.EXTENSION_UNAVAILABLE,
            f"spec.extensions: {', '.join(unavailable)} not installed in the instance's image.",
        )
    missing = tuple(e for e in o.wanted if e not in o.created)
    if missing:
        message = f"Created {', '.join(missing)}."
        return spec.pending(Reason.EXTENSIONS_CREATED, message, missing, after=AT_ONCE)
    listed = ", ".join(o.wanted) or "none asked for"
    return spec.satisfied(Reason.EXTENSIONS_READY, f"Extensions: {listed}.")


def act_extensions(ctx: Context, database: Database, _o: Extensions, missing: Any) -> None:
    instance = instance_of(ctx, database)
    assert database.spec is not None
    if instance is None:
        return
    with ledger.admin(ctx, instance, dbname=database.spec.name) as conn:
        if conn is not None:
            ledger.create_extensions(conn, list(missing))


EXTENSIONS = Anatomy(DATABASE_EXTENSIONS, observe_extensions, decide_extensions, act_extensions)
