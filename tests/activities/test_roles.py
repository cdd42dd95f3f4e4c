"""DBRoles on the stack: two databases and three roles on one instance. Each role's
Secret connects with verify-full to its database; a role without a grant is refused; a
role granted pg_read_all_data reads but cannot write; a rotation gives a password that
works and takes the old one away; hostile specs are refused naming the field; a role
that owns a database is kept when its object goes, one that owns nothing is dropped."""

from __future__ import annotations

import asyncio
import base64
import secrets
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from dbi import names
from tests.activities.declared import (
    admin,
    apply,
    connect,
    databases,
    gone,
    until_condition,
)
from tests.activities.lifecycle import SPEC, create
from tests.appclient import conninfo
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack
GIVEN = secrets.token_urlsafe(16)  # a password a user gives


def role(orchestrator: Orchestrator, namespace: str, name: str, spec: dict[str, Any]) -> None:
    apply(orchestrator, namespace, name, {"instance": "db", "name": name, **spec}, names.ROLE_KIND)


def secret(kube_api: Any, namespace: str, name: str) -> dict[str, str]:
    found = k8s.CoreV1Api(kube_api).read_namespaced_secret(f"{name}-credentials", namespace)
    return {k: base64.b64decode(v).decode() for k, v in (found.data or {}).items()}


def as_admin(kube_api: Any, orchestrator: Orchestrator, namespace: str, statement: str) -> None:
    with connect(kube_api, namespace, "postgres", admin(kube_api, orchestrator, namespace)) as c:
        c.execute(statement.encode())


async def logs_in(orchestrator: Orchestrator, kube_api: Any, namespace: str, name: str) -> None:
    """Wait until the role logs in with what its Secret holds now (the Secret is written
    before the role's password is set: a pass apart)."""

    await orchestrator.until(
        lambda: refused(kube_api, namespace, name) == "", what=f"{name} logs in"
    )


def secret_or_none(kube_api: Any, namespace: str, name: str) -> dict[str, str]:
    try:
        return secret(kube_api, namespace, name)
    except k8s.ApiException as e:
        if e.status == 404:
            return {}
        raise


def session(
    kube_api: Any, namespace: str, name: str, override: dict[str, str] | None = None
) -> psycopg.Connection[Any]:
    """A session as DBRole ``name``, with its Secret's uri (verify-full, its ca.crt)."""
    return psycopg.connect(
        conninfo(secret(kube_api, namespace, name)),
        connect_timeout=3,
        autocommit=True,
        **(override or {}),  # type: ignore[arg-type]
    )


def refused(
    kube_api: Any, namespace: str, name: str, override: dict[str, str] | None = None
) -> str:
    """Why a session as ``name`` (with ``override``) is refused; "" when it is not."""
    try:
        with session(kube_api, namespace, name, override):
            return ""
    except psycopg.OperationalError as e:
        return str(e)


async def test_roles_log_in_to_their_databases_with_what_they_are_granted(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    await create(orchestrator, namespace, SPEC)
    role(orchestrator, namespace, "alice", {"database": "shop"})
    role(orchestrator, namespace, "bob", {"database": "books", "connectionLimit": 5})
    role(orchestrator, namespace, "reader", {"database": "shop", "inRoles": ["pg_read_all_data"]})
    apply(orchestrator, namespace, "shop", {"instance": "db", "name": "shop", "owner": "alice"})
    apply(orchestrator, namespace, "books", {"instance": "db", "name": "books", "owner": "bob"})
    for kind, name in [
        *((names.ROLE_KIND, r) for r in ("alice", "bob", "reader")),
        *((names.DATABASE_KIND, d) for d in ("shop", "books")),
    ]:
        await until_condition(orchestrator, namespace, name, "Ready", "Converged", kind)

    def use() -> None:
        with session(kube_api, namespace, "alice") as alice:
            alice.execute("CREATE TABLE items (n int)")
            alice.execute("INSERT INTO items VALUES (1), (2)")
        with session(kube_api, namespace, "reader") as reader:
            assert reader.execute("SELECT count(*) FROM items").fetchone() == (2,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                reader.execute("INSERT INTO items VALUES (3)")
        with session(kube_api, namespace, "bob") as bob:
            assert bob.execute("SELECT current_database()").fetchone() == ("books",)
        denied = refused(kube_api, namespace, "bob", {"dbname": "shop"})
        assert "permission denied for database" in denied

    await asyncio.to_thread(use)

    # Rotation: a new request gives a new password that works, and the old one fails.
    old = secret(kube_api, namespace, "alice")["password"]
    orchestrator.kubectl(
        "annotate",
        names.ROLE_PLURAL,
        "alice",
        "-n",
        namespace,
        f"{names.ROTATE_REQUESTED_AT}=2026-12-07T00:00:00Z",
    )
    await orchestrator.until(
        lambda: secret(kube_api, namespace, "alice")["password"] != old, what="a new password"
    )
    await logs_in(orchestrator, kube_api, namespace, "alice")
    assert "password authentication failed" in await asyncio.to_thread(
        refused, kube_api, namespace, "alice", {"password": old}
    )

    # Rotation by deleting the Secret: the watcher wakes the role, which writes a new one.
    rotated = secret(kube_api, namespace, "alice")["password"]
    k8s.CoreV1Api(kube_api).delete_namespaced_secret("alice-credentials", namespace)
    await orchestrator.until(
        lambda: secret_or_none(kube_api, namespace, "alice").get("password", rotated) != rotated,
        timeout=60,
        what="alice-credentials written again with a new password",
    )
    await logs_in(orchestrator, kube_api, namespace, "alice")

    # A password the user gives (spec.passwordSecret) is the one the role logs in with.
    given = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="carol-password"), string_data={"password": GIVEN}
    )
    k8s.CoreV1Api(kube_api).create_namespaced_secret(namespace, given)
    role(
        orchestrator, namespace, "carol", {"database": "books", "passwordSecret": "carol-password"}
    )
    await until_condition(orchestrator, namespace, "carol", "Ready", "Converged", names.ROLE_KIND)
    assert secret(kube_api, namespace, "carol")["password"] == GIVEN
    assert await asyncio.to_thread(refused, kube_api, namespace, "carol") == ""

    await hostile(orchestrator, namespace, kube_api)

    # reader owns nothing: dropped; alice owns shop: kept, NOLOGIN.
    await gone(orchestrator, namespace, "reader", names.ROLE_KIND)
    await gone(orchestrator, namespace, "alice", names.ROLE_KIND)
    roles = await asyncio.to_thread(databases, kube_api, orchestrator, namespace, "roles")
    assert "reader" not in roles and "alice" in roles
    login = await asyncio.to_thread(databases, kube_api, orchestrator, namespace, "login")
    assert "alice" not in login and "bob" in login


async def hostile(orchestrator: Orchestrator, namespace: str, kube_api: Any) -> None:
    """A role of dbi's or another instance's, a predefined role off the list, a reserved
    name: each refused naming the field, nothing granted."""
    role(orchestrator, namespace, "mallory", {"inRoles": ["dbi_admin"]})
    role(orchestrator, namespace, "eve", {"inRoles": ["pg_execute_server_program"]})
    # Another instance's role, declared in this namespace: not one this instance has.
    other = {"instance": "other", "name": "victim_role"}
    apply(orchestrator, namespace, "victim", other, names.ROLE_KIND)
    role(orchestrator, namespace, "trudy", {"inRoles": ["victim_role"]})
    role(orchestrator, namespace, "evil", {"name": "pg_evil"})
    # A role made by hand (as a superuser): dbi neither takes it over nor drops it.
    await asyncio.to_thread(as_admin, kube_api, orchestrator, namespace, "CREATE ROLE legacy LOGIN")
    role(orchestrator, namespace, "legacy", {})
    foreign = await until_condition(
        orchestrator, namespace, "legacy", "RoleReady", "ForeignRole", names.ROLE_KIND
    )
    assert foreign[2].startswith("spec.name:")
    await gone(orchestrator, namespace, "legacy", names.ROLE_KIND)
    assert "legacy" in await asyncio.to_thread(
        databases, kube_api, orchestrator, namespace, "login"
    )
    for name, type_, reason, field in [
        ("mallory", "InstanceReady", "FieldRefused", "spec.inRoles"),
        ("eve", "InstanceReady", "FieldRefused", "spec.inRoles"),
        ("trudy", "GrantsReady", "UnknownRole", "spec.inRoles"),
        ("evil", "InstanceReady", "FieldRefused", "spec.name"),
    ]:
        found = await until_condition(orchestrator, namespace, name, type_, reason, names.ROLE_KIND)
        assert found[2].startswith(f"{field}:"), found
    # An instance of another namespace cannot be named: the API server refuses it.
    spec = {"instance": "victim/db", "name": "x"}
    with pytest.raises(AssertionError, match=r"spec.instance"):
        apply(orchestrator, namespace, "elsewhere", spec, names.ROLE_KIND)
    granted = await asyncio.to_thread(databases, kube_api, orchestrator, namespace, "roles")
    assert "pg_evil" not in granted and "mallory" not in granted and "eve" not in granted
