"""A DBDatabase's steps (``dbi.pipeline.DATABASE``), each an observe, a pure decide and
one act (``activities.objects.loop``); its teardown is ``database_release``.

- database_instance (InstanceReady): ``activities.objects.instance``; refused: a reserved
  name or the instance's own database, dbi's admin or a ``pg_`` role as owner, an
  extension off the allow-list (``dbi.databases.refusal``).
- database_create (DatabaseReady): the database exists, the ledger proves it this
  object's (``dbi.objects.whose``), its owner is ``spec.owner`` (default: the
  instance's application role). It is created with CONNECT and TEMP revoked from
  PUBLIC: only its owner and roles granted may connect. A foreign database of the name,
  or one another DBDatabase holds, is Terminal and never touched.
- database_extensions (ExtensionsReady): each of ``spec.extensions`` is created.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import psycopg
from psycopg import sql

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.objects import instance as on_instance
from activities.objects import ledger
from activities.objects.instance import instance_of, no_address
from activities.objects.loop import Anatomy
from activities.objects.object import Declared
from activities.steps.loop import Refused
from dbi import names
from dbi.config import ADMIN_USER
from dbi.databases import DBDatabaseSpec, refusal
from dbi.objects import Ledger, Verdict, whose
from dbi.pipeline import DATABASE_CREATE, DATABASE_EXTENSIONS, DATABASE_INSTANCE
from dbi.steps import AT_ONCE, Decision, Outcome

KIND = names.DATABASE_KIND


class Reason(StrEnum):
    DATABASE_READY = DATABASE_CREATE.condition_type
    OWNER_MISSING = "OwnerMissing"
    OWNER_NOT_ALLOWED = "OwnerNotAllowed"
    FOREIGN = "ForeignDatabase"
    CLAIMED = "DatabaseClaimed"
    CREATED = "DatabaseCreated"
    ADOPTED = "DatabaseAdopted"
    OWNER_SET = "OwnerSet"
    EXTENSIONS_READY = DATABASE_EXTENSIONS.condition_type
    EXTENSION_UNAVAILABLE = "ExtensionUnavailable"
    EXTENSIONS_CREATED = "ExtensionsCreated"


def owner_of(spec: DBDatabaseSpec, instance: Instance) -> str:
    return spec.owner or instance.model.spec.credentials.username


def _refusal(ctx: Context, declared: Declared, instance: Instance | None) -> tuple[str, str] | None:
    own = "" if instance is None else instance.model.spec.credentials.database
    spec = declared.spec_as(DBDatabaseSpec)
    return refusal(spec, own_database=own, admin=ADMIN_USER, allowed=ctx.config.extensions)


INSTANCE = on_instance.step(DATABASE_INSTANCE, _refusal)


@dataclass(frozen=True)
class Seen:
    """The database of a name, its ledger row and its would-be owner, as read."""

    db_oid: int | None = None
    db_owner: str | None = None
    row: Ledger | None = None
    owner_exists: bool = False
    owner_superuser: bool = False


def look(conn: psycopg.Connection[Any], name: str, owner: str) -> Seen:
    db = conn.execute(
        "SELECT oid::int8, pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (name,)
    ).fetchone()
    role = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (owner,)).fetchone()
    return Seen(
        db_oid=None if db is None else db[0],
        db_owner=None if db is None else db[1],
        row=ledger.row(conn, KIND, name),
        owner_exists=role is not None,
        owner_superuser=bool(role and role[0]),
    )


@dataclass(frozen=True)
class InInstance:
    name: str
    owner: str
    uid: str
    reachable: bool
    seen: Seen


def observe_database(ctx: Context, declared: Declared) -> InInstance:
    spec, instance = declared.spec_as(DBDatabaseSpec), instance_of(ctx, declared)
    assert instance is not None  # database_instance saw it
    owner = owner_of(spec, instance)
    with ledger.admin(ctx, instance) as conn:
        seen = Seen() if conn is None else look(conn, spec.name, owner)
    return InInstance(spec.name, owner, declared.uid, conn is not None, seen)


def decide_database(o: InInstance) -> Decision[str]:
    spec, seen = DATABASE_CREATE, o.seen
    if not o.reachable:
        return no_address(spec)
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


def act_database(ctx: Context, declared: Declared, o: InInstance, action: str) -> None:
    instance = instance_of(ctx, declared)
    if instance is None:
        return
    ident = sql.Identifier(o.name)
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return
        if action == "create":
            if not ledger.claim(conn, KIND, o.name, o.uid):
                claimed = f"spec.name: database {o.name} is another DBDatabase's."
                raise Refused(DATABASE_CREATE.result(Outcome.TERMINAL, Reason.CLAIMED, claimed))
            owner = sql.Identifier(o.owner)
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(ident, owner))
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
        if action in ("create", "adopt"):
            ledger.record(conn, KIND, o.name, o.uid)
        else:
            owner = sql.Identifier(o.owner)
            conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(ident, owner))


CREATE = Anatomy(DATABASE_CREATE, observe_database, decide_database, act_database)


@dataclass(frozen=True)
class Extensions:
    wanted: tuple[str, ...]
    created: frozenset[str] = frozenset()
    available: frozenset[str] = frozenset()
    reachable: bool = True


def observe_extensions(ctx: Context, declared: Declared) -> Extensions:
    spec, instance = declared.spec_as(DBDatabaseSpec), instance_of(ctx, declared)
    assert instance is not None
    if not spec.extensions:
        return Extensions(())
    with ledger.admin(ctx, instance, dbname=spec.name) as conn:
        if conn is None:
            return Extensions(tuple(spec.extensions), reachable=False)
        created = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
        available = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions")}
    return Extensions(tuple(spec.extensions), frozenset(created), frozenset(available))


def decide_extensions(o: Extensions) -> Decision[tuple[str, ...]]:
    spec = DATABASE_EXTENSIONS
    if not o.reachable:
        return no_address(spec)
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


def act_extensions(ctx: Context, declared: Declared, _o: Extensions, missing: Any) -> None:
    instance, spec = instance_of(ctx, declared), declared.spec_as(DBDatabaseSpec)
    if instance is None:
        return
    with ledger.admin(ctx, instance, dbname=spec.name) as conn:
        if conn is None:
            return
        for name in list(missing):
            conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))


EXTENSIONS = Anatomy(DATABASE_EXTENSIONS, observe_extensions, decide_extensions, act_extensions)
