"""role_release (RoleReleased): the teardown of a DBRole being deleted.

A role the ledger proves the object's is dropped when it owns nothing and holds no
privilege in any database (``pg_shdepend``) but the CONNECT role_grants gave it (revoked
first); one that does is kept with NOLOGIN and
released (a new DBRole of the name adopts it): dropping it would need its objects
reassigned or dropped, which is data. A role that is not the object's is left alone,
and a missing instance has nothing to drop. Then the finalizer comes off; the
credentials Secret goes with the object (its owner reference).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from psycopg import sql

from activities.infra.context import Context
from activities.objects import ledger
from activities.objects.instance import finalizer_off, instance_of, no_address
from activities.objects.loop import Anatomy
from activities.objects.object import Declared
from activities.objects.role_create import KIND, Role, look
from dbi import names
from dbi.objects import Verdict, whose
from dbi.pipeline import ROLE_RELEASE
from dbi.roles import DBRoleSpec
from dbi.steps import AT_ONCE, Decision

NONE = Role()


class Reason(StrEnum):
    RELEASED = ROLE_RELEASE.condition_type
    DROPPED = "RoleDropped"
    KEPT = "RoleKept"


@dataclass(frozen=True)
class Release:
    name: str
    finalized: bool
    instance: str
    uid: str
    exists: bool = False
    reachable: bool = False
    role: Role = NONE
    depended_on: bool = False  # owns objects or holds privileges dbi did not grant
    database: str = ""  # where dbi granted CONNECT (spec.database)


def observe_release(ctx: Context, declared: Declared) -> Release:
    finalized = names.FINALIZER in declared.finalizers
    if declared.spec is None:  # unreadable: nothing can be proven, the object goes
        return Release(declared.name, finalized, "", declared.uid)
    spec = declared.spec_as(DBRoleSpec)
    base = Release(spec.name, finalized, spec.instance, declared.uid)
    instance = instance_of(ctx, declared) if finalized else None
    if instance is None:
        return base
    database = spec.database or instance.model.spec.credentials.database
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return replace(base, exists=True)
        role = look(conn, spec.name)
        # What it owns or was granted, anywhere, but the CONNECT dbi granted it.
        depended = role.oid is not None and conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_shdepend s WHERE s.refclassid = 'pg_authid'::regclass"
            " AND s.refobjid = %s AND s.deptype IN ('o', 'a') AND NOT (s.deptype = 'a'"
            " AND s.classid = 'pg_database'::regclass AND s.objid ="
            " (SELECT oid FROM pg_database WHERE datname = %s)))",
            (role.oid, database),
        ).fetchone() == (True,)
    found = replace(base, exists=True, reachable=True, role=role, database=database)
    return replace(found, depended_on=depended)


def decide_release(o: Release) -> Decision[str]:
    spec = ROLE_RELEASE
    if not o.finalized:
        return spec.satisfied(Reason.RELEASED, "Released; the object goes.")
    if not o.exists:
        message = f"No DBInstance {o.instance}: nothing to drop; finalizer removed."
        return spec.pending(Reason.RELEASED, message, "unfinalize", after=AT_ONCE)
    if not o.reachable:
        return no_address(spec)
    if whose(o.role.oid, o.role.row, o.uid) is Verdict.OURS:
        if o.depended_on:
            message = (
                f"Kept role {o.name} with NOLOGIN: it owns objects or holds privileges; a "
                "new DBRole of the name adopts it."
            )
            return spec.pending(Reason.KEPT, message, "keep", after=AT_ONCE)
        return spec.pending(Reason.DROPPED, f"Dropped role {o.name}.", "drop", after=AT_ONCE)
    if o.role.oid is None:
        message = f"No role {o.name}: nothing to drop; finalizer removed."
    else:
        message = f"Role {o.name} is not this object's: left alone; finalizer removed."
    return spec.pending(Reason.RELEASED, message, "unfinalize", after=AT_ONCE)


def act_release(ctx: Context, declared: Declared, o: Release, action: str) -> None:
    if action in ("drop", "keep"):
        instance = instance_of(ctx, declared)
        if instance is None:
            return
        ident = sql.Identifier(o.name)
        with ledger.admin(ctx, instance) as conn:
            if conn is None:
                return
            if action == "keep":
                conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(ident))
                ledger.release(conn, KIND, o.name, o.uid)
            else:
                assert o.role.oid is not None
                if ledger.proven(conn, KIND, o.name, o.role.oid, o.uid):
                    on = sql.Identifier(o.database)
                    revoke = sql.SQL("REVOKE CONNECT ON DATABASE {} FROM {}")
                    conn.execute(revoke.format(on, ident))
                    conn.execute(sql.SQL("DROP ROLE {}").format(ident))
                ledger.forget(conn, KIND, o.name, o.uid)
                return  # the next look finds it gone and takes the finalizer off
    finalizer_off(ctx, declared)


RELEASE = Anatomy(ROLE_RELEASE, observe_release, decide_release, act_release)
