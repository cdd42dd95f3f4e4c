"""DBDatabases and DBRoles on the stack: apply one, read its conditions, wait for one,
delete it, and look into its instance as dbi's admin."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from dbi import names
from dbi.config import ADMIN_USER
from dbi.objects import KINDS
from tests.activities.lifecycle import uri
from tests.activities.logins import admin_credential
from tests.orchestrator import Orchestrator


def apply(
    orchestrator: Orchestrator,
    namespace: str,
    name: str,
    spec: dict[str, Any],
    kind: str = names.DATABASE_KIND,
) -> None:
    manifest = {
        "apiVersion": names.API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    orchestrator.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))


def get(
    orchestrator: Orchestrator, namespace: str, name: str, kind: str = names.DATABASE_KIND
) -> dict[str, Any]:
    plural = KINDS[kind].plural
    found = orchestrator.kubectl("get", plural, name, "-n", namespace, "-o", "json", check=False)
    return dict(json.loads(found.stdout)) if found.returncode == 0 else {}


def condition(obj: dict[str, Any], kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of a condition of the object's current generation."""
    status = obj.get("status", {})
    if status.get("observedGeneration") != obj.get("metadata", {}).get("generation"):
        return None
    for c in status.get("conditions", []):
        if c["type"] == kind:
            return (c["status"], c["reason"], c["message"])
    return None


async def until_condition(
    orchestrator: Orchestrator,
    namespace: str,
    name: str,
    type_: str,
    reason: str,
    kind: str = names.DATABASE_KIND,
) -> tuple[str, str, str]:
    def check() -> tuple[str, str, str] | None:
        found = condition(get(orchestrator, namespace, name, kind), type_)
        return found if found is not None and found[1] == reason else None

    try:
        got: tuple[str, str, str] = await orchestrator.until(
            check, what=f"{kind} {name} {type_} {reason}"
        )
    except AssertionError as e:
        found = get(orchestrator, namespace, name, kind)
        conditions = found.get("status", {}).get("conditions", [])
        raise AssertionError(f"{e}; conditions: {conditions}") from None
    return got


def connect(
    kube_api: Any, namespace: str, dbname: str, login: dict[str, str] | None = None
) -> psycopg.Connection[Any]:
    """A session on instance ``db``'s database ``dbname``: as its app role (the credentials
    Secret), or with ``login``'s user and password; verify-full either way."""
    return psycopg.connect(
        uri(kube_api, namespace, "db"),
        dbname=dbname,
        connect_timeout=3,
        autocommit=True,
        **(login or {}),  # type: ignore[arg-type]
    )


def admin(kube_api: Any, orchestrator: Orchestrator, namespace: str) -> dict[str, str]:
    password = admin_credential(kube_api, orchestrator, namespace)["password"]
    return {"user": ADMIN_USER, "password": password}


LISTS = {
    "databases": "SELECT datname FROM pg_database",
    "roles": "SELECT rolname FROM pg_roles",
    "login": "SELECT rolname FROM pg_roles WHERE rolcanlogin",
}


def databases(
    kube_api: Any, orchestrator: Orchestrator, namespace: str, what: str = "databases"
) -> set[str]:
    """The names of the instance's databases (or its roles, or those that log in)."""
    with connect(kube_api, namespace, "postgres", admin(kube_api, orchestrator, namespace)) as c:
        return {r[0] for r in c.execute(LISTS[what].encode())}


async def gone(
    orchestrator: Orchestrator, namespace: str, name: str, kind: str = names.DATABASE_KIND
) -> None:
    plural = KINDS[kind].plural
    orchestrator.kubectl("delete", plural, name, "-n", namespace, "--wait=false")
    await orchestrator.until(
        lambda: not get(orchestrator, namespace, name, kind), what=f"{kind} {name} gone"
    )
