"""database_release (DatabaseReleased): the teardown of a DBDatabase being deleted.

Under deletionPolicy Delete it drops the database the ledger proves the object's
(``dbi.databases.whose``, ``activities.databases.ledger.drop``); under Retain it marks
it released, kept with its rows for a new DBDatabase of the name to adopt. A database
that is not the object's is left alone, and a missing instance has nothing to drop or
keep. Then the finalizer comes off: the object's deletion never waits on an instance
that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from psycopg import sql

from activities.infra.context import Context
from activities.objects import ledger
from activities.objects.database import KIND, Seen, look, owner_of
from activities.objects.instance import finalizer_off, instance_of, no_address
from activities.objects.loop import Anatomy
from activities.objects.object import Declared
from dbi import names
from dbi.databases import DBDatabaseSpec, DeletionPolicy
from dbi.objects import Verdict, whose
from dbi.pipeline import DATABASE_RELEASE
from dbi.steps import AT_ONCE, Decision


class Reason(StrEnum):
    RELEASED = DATABASE_RELEASE.condition_type
    DROPPED = "DatabaseDropped"
    KEPT = "DatabaseKept"


NOT_SEEN = Seen()


@dataclass(frozen=True)
class Release:
    name: str
    finalized: bool
    policy: DeletionPolicy
    instance: str
    uid: str
    exists: bool = False
    reachable: bool = False
    seen: Seen = NOT_SEEN


def observe_release(ctx: Context, declared: Declared) -> Release:
    finalized = names.FINALIZER in declared.finalizers
    if declared.spec is None:  # unreadable: nothing can be proven, the object goes
        return Release(declared.name, finalized, DeletionPolicy.RETAIN, "", declared.uid)
    spec = declared.spec_as(DBDatabaseSpec)
    base = Release(spec.name, finalized, spec.deletion_policy, spec.instance, declared.uid)
    instance = instance_of(ctx, declared) if finalized else None
    if instance is None:
        return base
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return replace(base, exists=True)
        seen = look(conn, spec.name, owner_of(spec, instance))
    return replace(base, exists=True, reachable=True, seen=seen)


def decide_release(o: Release) -> Decision[str]:
    spec = DATABASE_RELEASE
    if not o.finalized:
        return spec.satisfied(Reason.RELEASED, "Released; the object goes.")
    if not o.exists:
        message = f"No DBInstance {o.instance}: nothing to drop or keep; finalizer removed."
        return spec.pending(Reason.RELEASED, message, "unfinalize", after=AT_ONCE)
    if not o.reachable:
        return no_address(spec)
    row = o.seen.row
    ours = row is not None and row.object_uid == o.uid and not row.released
    if whose(o.seen.db_oid, row, o.uid) is Verdict.OURS and o.policy is DeletionPolicy.DELETE:
        message = f"Dropped database {o.name} (deletionPolicy Delete)."
        return spec.pending(Reason.DROPPED, message, "drop", after=AT_ONCE)
    if ours and o.seen.db_oid is not None:
        message = f"Kept database {o.name} (deletionPolicy Retain); a new DBDatabase adopts it."
        return spec.pending(Reason.KEPT, message, "release", after=AT_ONCE)
    if o.seen.db_oid is None:
        message = f"No database {o.name}: nothing to drop; finalizer removed."
    else:
        message = f"Database {o.name} is not this object's: left alone; finalizer removed."
    return spec.pending(Reason.RELEASED, message, "unfinalize", after=AT_ONCE)


def act_release(ctx: Context, declared: Declared, o: Release, action: str) -> None:
    if action in ("drop", "release"):
        instance = instance_of(ctx, declared)
        if instance is None:
            return
        with ledger.admin(ctx, instance) as conn:
            if conn is None:
                return
            if action == "release":  # kept: the finalizer goes in the same act
                ledger.release(conn, KIND, o.name, o.uid)
            else:
                assert o.seen.db_oid is not None
                if ledger.proven(conn, KIND, o.name, o.seen.db_oid, o.uid):
                    drop = sql.SQL("DROP DATABASE {} WITH (FORCE)")
                    conn.execute(drop.format(sql.Identifier(o.name)))
                ledger.forget(conn, KIND, o.name, o.uid)
                return  # the next look finds it gone and takes the finalizer off
    finalizer_off(ctx, declared)


RELEASE = Anatomy(DATABASE_RELEASE, observe_release, decide_release, act_release)
