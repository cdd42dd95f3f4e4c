"""DBDatabases on the stack: two databases on one instance, each owned and reachable as
declared; a foreign database of the name is never touched; Retain keeps a database and
its rows, Delete drops it; an instance deleted first leaves the objects Stalled, and
their deletion does not hang on it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.activities.declared import admin, apply, connect, databases, gone, until_condition
from tests.activities.lifecycle import SPEC, create
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


async def test_databases_are_created_owned_kept_and_dropped_as_declared(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    instance = await create(orchestrator, namespace, SPEC)
    app = instance["spec"]["credentials"]["username"]
    apply(
        orchestrator,
        namespace,
        "orders",
        {"instance": "db", "name": "orders", "extensions": ["citext"], "deletionPolicy": "Delete"},
    )
    apply(orchestrator, namespace, "billing", {"instance": "db", "name": "billing"})
    for name in ("orders", "billing"):
        await until_condition(orchestrator, namespace, name, "Ready", "Converged")

    # The app role owns both (the default owner) and connects to each with verify-full.
    with connect(kube_api, namespace, "orders") as conn:
        assert conn.execute(
            "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'orders'"
        ).fetchone() == (app,)
        assert ("citext",) in conn.execute("SELECT extname FROM pg_extension").fetchall()
    with connect(kube_api, namespace, "billing") as conn:
        conn.execute("CREATE TABLE invoices (n int)")
        conn.execute("INSERT INTO invoices VALUES (1), (2)")

    await asyncio.to_thread(check_foreign_and_refused, orchestrator, namespace, kube_api)
    await until_condition(orchestrator, namespace, "foreign", "DatabaseReady", "ForeignDatabase")
    await until_condition(orchestrator, namespace, "template", "InstanceReady", "FieldRefused")
    await until_condition(orchestrator, namespace, "offlist", "InstanceReady", "FieldRefused")
    await gone(orchestrator, namespace, "foreign")
    assert "legacy" in await asyncio.to_thread(databases, kube_api, orchestrator, namespace)

    # Retain keeps the database and its rows; Delete drops it.
    await gone(orchestrator, namespace, "billing")
    await gone(orchestrator, namespace, "orders")
    left = await asyncio.to_thread(databases, kube_api, orchestrator, namespace)
    assert "billing" in left and "orders" not in left
    with connect(kube_api, namespace, "billing") as conn:
        assert conn.execute("SELECT count(*) FROM invoices").fetchone() == (2,)

    # A new object of the name adopts the kept database, rows and all.
    apply(orchestrator, namespace, "billing2", {"instance": "db", "name": "billing"})
    await until_condition(orchestrator, namespace, "billing2", "Ready", "Converged")

    # The instance deleted first: the object is Stalled, and its deletion does not hang.
    await orchestrator.delete(namespace, "db")
    stalled = await until_condition(
        orchestrator, namespace, "billing2", "Stalled", "InstanceNotFound"
    )
    assert stalled[0] == "True" and "spec.instance" in stalled[2]
    await gone(orchestrator, namespace, "billing2")


def check_foreign_and_refused(orchestrator: Orchestrator, namespace: str, kube_api: Any) -> None:
    """A database dbi did not create (by hand, as a superuser), a reserved name and an
    extension off the list: each refused, naming the field."""
    with connect(kube_api, namespace, "postgres", admin(kube_api, orchestrator, namespace)) as c:
        c.execute("CREATE DATABASE legacy")
    apply(
        orchestrator,
        namespace,
        "foreign",
        {"instance": "db", "name": "legacy", "deletionPolicy": "Delete"},
    )
    apply(orchestrator, namespace, "template", {"instance": "db", "name": "template1"})
    apply(
        orchestrator,
        namespace,
        "offlist",
        {"instance": "db", "name": "x", "extensions": ["plpython3u"]},
    )
