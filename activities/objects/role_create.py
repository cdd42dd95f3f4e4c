"""role_create (RoleReady) and role_grants (GrantsReady): a DBRole's role in its
instance, as ``activities.objects.role`` says; here the SQL and its decisions."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, cast

import psycopg
from psycopg import sql

from activities.infra.context import Context
from activities.objects import ledger
from activities.objects.instance import instance_of, no_address
from activities.objects.loop import Anatomy
from activities.objects.object import Declared
from activities.objects.role import secret_name
from activities.steps.loop import Refused
from dbi import names, scram
from dbi.objects import Ledger, Verdict, whose
from dbi.pipeline import ROLE_CREATE, ROLE_GRANTS
from dbi.roles import DBRoleSpec
from dbi.steps import AT_ONCE, Decision, Outcome

KIND = names.ROLE_KIND


class Reason(StrEnum):
    ROLE_READY = ROLE_CREATE.condition_type
    FOREIGN = "ForeignRole"
    CLAIMED = "RoleClaimed"
    CREATED = "RoleCreated"
    ADOPTED = "RoleAdopted"
    ALTERED = "RoleAltered"
    GRANTS_READY = ROLE_GRANTS.condition_type
    GRANTED = "GrantsChanged"
    UNKNOWN_ROLE = "UnknownRole"
    WAITING_FOR_ROLE = "WaitingForRole"
    WAITING_FOR_DATABASE = "WaitingForDatabase"


@dataclass(frozen=True)
class Role:
    """The role of a name as read: its oid, attributes, verifier, and ledger row."""

    oid: int | None = None
    login: bool = False
    limit: int = -1
    verifier: str = ""
    superuser: bool = False
    row: Ledger | None = None

    def __repr__(self) -> str:  # never the verifier
        return f"Role(oid={self.oid}, login={self.login}, limit={self.limit})"


def look(conn: psycopg.Connection[Any], name: str) -> Role:
    found = conn.execute(
        "SELECT oid::int8, rolcanlogin, rolconnlimit, coalesce(rolpassword, ''), rolsuper"
        " FROM pg_authid WHERE rolname = %s",
        (name,),
    ).fetchone()
    row = ledger.row(conn, KIND, name)
    if found is None:
        return Role(row=row)
    oid, login, limit, verifier, superuser = found
    return Role(oid, login, limit, verifier, superuser, row)


@dataclass(frozen=True)
class Seen:
    name: str
    uid: str
    login: bool
    limit: int
    password: str
    reachable: bool
    role: Role

    def __repr__(self) -> str:  # never the password
        return f"Seen({self.name}, reachable={self.reachable}, {self.role!r})"


def _password(ctx: Context, declared: Declared) -> str:
    found = ctx.kube.secret(declared.namespace, secret_name(declared))
    value = ((found.data if found is not None else None) or {}).get("password", "")
    return base64.b64decode(value).decode()


def observe_role(ctx: Context, declared: Declared) -> Seen:
    spec, instance = declared.spec_as(DBRoleSpec), instance_of(ctx, declared)
    assert instance is not None
    password = _password(ctx, declared)
    with ledger.admin(ctx, instance) as conn:
        role = Role() if conn is None else look(conn, spec.name)
    return Seen(
        spec.name,
        declared.uid,
        spec.login,
        spec.connection_limit,
        password,
        conn is not None,
        role,
    )


def decide_role(o: Seen) -> Decision[str]:
    spec, role = ROLE_CREATE, o.role
    if not o.reachable:
        return no_address(spec)
    verdict = whose(role.oid, role.row, o.uid)
    if verdict is Verdict.FOREIGN or role.superuser:
        message = f"spec.name: a role {o.name} exists that dbi did not create; dbi leaves it."
        return spec.terminal(Reason.FOREIGN, message)
    if verdict is Verdict.CLAIMED:
        return spec.terminal(Reason.CLAIMED, f"spec.name: role {o.name} is another DBRole's.")
    return _converge_role(o, verdict)


def _converge_role(o: Seen, verdict: Verdict) -> Decision[str]:
    spec, role = ROLE_CREATE, o.role
    if verdict is Verdict.MISSING:
        return spec.pending(Reason.CREATED, f"Created role {o.name}.", "create", after=AT_ONCE)
    if verdict is Verdict.ADOPT:
        return spec.pending(Reason.ADOPTED, f"Adopted role {o.name}.", "adopt", after=AT_ONCE)
    drifted = (role.login, role.limit) != (o.login, o.limit)
    if drifted or not scram.verifies(o.password, role.verifier):
        message = f"Role {o.name}: LOGIN, connection limit and password as declared."
        return spec.pending(Reason.ALTERED, message, "alter", after=AT_ONCE)
    return spec.satisfied(Reason.ROLE_READY, f"Role {o.name} is as declared.")


def act_role(ctx: Context, declared: Declared, o: Seen, action: str) -> None:
    instance = instance_of(ctx, declared)
    if instance is None:
        return
    ident = sql.Identifier(o.name)
    login = sql.SQL("LOGIN" if o.login else "NOLOGIN")
    options = sql.SQL("{} CONNECTION LIMIT {} PASSWORD {}").format(
        login, sql.Literal(o.limit), sql.Literal(scram.verifier(o.password))
    )
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return
        if action == "create":
            if not ledger.claim(conn, KIND, o.name, o.uid):
                claimed = f"spec.name: role {o.name} is another DBRole's."
                raise Refused(ROLE_CREATE.result(Outcome.TERMINAL, Reason.CLAIMED, claimed))
            conn.execute(sql.SQL("CREATE ROLE {} {}").format(ident, options))
        if action in ("create", "adopt"):
            ledger.record(conn, KIND, o.name, o.uid)
        if action in ("adopt", "alter"):
            conn.execute(sql.SQL("ALTER ROLE {} {}").format(ident, options))


CREATE = Anatomy(ROLE_CREATE, observe_role, decide_role, act_role)


@dataclass(frozen=True)
class Grants:
    name: str
    wanted: frozenset[str]
    member_of: frozenset[str] = frozenset()  # among those dbi manages or may grant
    managed: frozenset[str] = frozenset()  # DBRoles' roles on this instance, created
    declared: frozenset[str] = frozenset()  # DBRoles' roles on this instance, declared
    reachable: bool = True
    database: str = ""  # the database its Secret names: it may connect there
    database_exists: bool = True
    can_connect: bool = True


def observe_grants(ctx: Context, declared: Declared) -> Grants:
    spec, instance = declared.spec_as(DBRoleSpec), instance_of(ctx, declared)
    assert instance is not None
    wanted = frozenset(spec.in_roles)
    database = spec.database or instance.model.spec.credentials.database
    listed = cast(
        dict[str, Any],
        ctx.kube.objects.list_namespaced_custom_object(
            names.GROUP, names.VERSION, declared.namespace, names.ROLE_PLURAL
        ),
    )
    on_this = frozenset(
        str(item["spec"].get("name"))
        for item in listed.get("items", [])
        if item.get("spec", {}).get("instance") == spec.instance
    )
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return Grants(spec.name, wanted, reachable=False)
        managed = frozenset(ledger.owned(conn, KIND) - {spec.name})
        grantable = managed | ctx.config.grantable
        member_of = {
            r[0]
            for r in conn.execute(
                "SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid"
                " JOIN pg_roles u ON u.oid = m.member WHERE u.rolname = %s",
                (spec.name,),
            )
        }
        connect = conn.execute(
            "SELECT has_database_privilege(%s, datname, 'CONNECT') FROM pg_database"
            " WHERE datname = %s",
            (spec.name, database),
        ).fetchone()
    return Grants(
        spec.name,
        wanted,
        frozenset(member_of & grantable),
        managed,
        on_this,
        database=database,
        database_exists=connect is not None,
        can_connect=bool(connect and connect[0]),
    )


def decide_grants(o: Grants) -> Decision[tuple[frozenset[str], frozenset[str], bool]]:
    spec = ROLE_GRANTS
    if not o.reachable:
        return no_address(spec)
    dbi_roles = sorted(r for r in o.wanted if not r.startswith("pg_"))
    unknown = [r for r in dbi_roles if r not in o.declared and r not in o.managed]
    if unknown:
        message = (
            f"spec.inRoles: {', '.join(unknown)} is not a DBRole of this instance; dbi "
            "grants only the roles it manages here and predefined ones."
        )
        return spec.terminal(Reason.UNKNOWN_ROLE, message)
    waiting = [r for r in dbi_roles if r not in o.managed]
    if waiting:
        message = f"spec.inRoles: waiting for role {', '.join(waiting)} to be created."
        return spec.pending(Reason.WAITING_FOR_ROLE, message, after=30.0)
    if not o.database_exists:
        message = f"spec.database: waiting for database {o.database} to be created."
        return spec.pending(Reason.WAITING_FOR_DATABASE, message, after=30.0)
    grant, revoke = o.wanted - o.member_of, o.member_of - o.wanted
    listed = ", ".join(sorted(o.wanted)) or "no role"
    said = f"Role {o.name} may connect to {o.database} and is a member of {listed}."
    if grant or revoke or not o.can_connect:
        change = (grant, revoke, not o.can_connect)
        return spec.pending(Reason.GRANTED, said, change, after=AT_ONCE)
    return spec.satisfied(Reason.GRANTS_READY, said)


def act_grants(ctx: Context, declared: Declared, o: Grants, change: Any) -> None:
    grant, revoke, connect = change
    instance = instance_of(ctx, declared)
    if instance is None:
        return
    member = sql.Identifier(o.name)
    with ledger.admin(ctx, instance) as conn:
        if conn is None:
            return
        for role in sorted(grant):
            conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(role), member))
        for role in sorted(revoke):
            conn.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(role), member))
        if connect:
            database = sql.Identifier(o.database)
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, member))


GRANTS = Anatomy(ROLE_GRANTS, observe_grants, decide_grants, act_grants)
