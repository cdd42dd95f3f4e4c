"""database_release (DatabaseReleased): the teardown of a DBDatabase being deleted.

Under deletionPolicy Delete it drops the database the ledger proves the object's
(``dbi.databases.whose``, ``activities.databases.ledger.drop``); under Retain it marks
it released, kept with its rows for a new DBDatabase of the name to adopt. A database
that is not the object's is left alone, and a missing instance has nothing to drop or
keep. Then the finalizer comes off: the object's deletion never waits on an instance
that is gone.
"""

from __future__ import annotations

from dataclasses import dataclass

from activities.databases import ledger
from activities.databases.loop import Anatomy
from activities.databases.object import Database, set_finalizers
from activities.databases.steps import Reason, instance_of, owner_of
from activities.infra.context import Context
from dbi import names
from dbi.databases import DeletionPolicy, Verdict, whose
from dbi.pipeline import DATABASE_RELEASE
from dbi.steps import AT_ONCE, Decision

NOT_SEEN = ledger.Seen()


@dataclass(frozen=True)
class Release:
    name: str
    finalized: bool
    policy: DeletionPolicy
    instance: str
    uid: str
    exists: bool = False
    reachable: bool = False
    seen: ledger.Seen = NOT_SEEN


def observe_release(ctx: Context, database: Database) -> Release:
    spec = database.spec
    finalized = names.FINALIZER in database.finalizers
    if spec is None:  # unreadable: nothing can be proven, the object goes
        return Release(database.name, finalized, DeletionPolicy.RETAIN, "", database.uid)
    base = Release(spec.name, finalized, spec.deletion_policy, spec.instance, database.uid)
    instance = instance_of(ctx, database) if finalized else None
    if instance is None:
        return base
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return Release(**{**base.__dict__, "exists": True})
        seen = ledger.look(conn, spec.name, owner_of(spec, instance))
    return Release(**{**base.__dict__, "exists": True, "reachable": True, "seen": seen})


def decide_release(o: Release) -> Decision[str]:
    spec = DATABASE_RELEASE
    if not o.finalized:
        return spec.satisfied(Reason.RELEASED, "Released; the object goes.")
    if not o.exists:
        message = f"No DBInstance {o.instance}: nothing to drop or keep; finalizer removed."
        return spec.pending(Reason.RELEASED, message, "unfinalize", after=AT_ONCE)
    if not o.reachable:
        return spec.pending(Reason.NO_ADDRESS, "The instance's VM has no address yet.", after=10.0)
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


def act_release(ctx: Context, database: Database, o: Release, action: str) -> None:
    if action in ("drop", "release"):
        instance = instance_of(ctx, database)
        if instance is None:
            return
        with ledger.admin(ctx, instance) as conn:
            if conn is None:
                return
            if action == "drop":
                assert o.seen.db_oid is not None
                ledger.drop(conn, o.name, o.seen.db_oid, o.uid)
            else:  # kept: the finalizer goes in the same act
                ledger.release(conn, o.name, o.uid)
        if action == "drop":
            return  # the next look finds it gone and takes the finalizer off
    kept = [f for f in database.finalizers if f != names.FINALIZER]
    set_finalizers(ctx.kube, database, kept)


RELEASE = Anatomy(DATABASE_RELEASE, observe_release, decide_release, act_release)
