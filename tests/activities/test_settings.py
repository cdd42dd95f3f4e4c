"""spec.postgresql.parameters on the stack: a reloadable setting applies without a
restart (sessions stay), values PostgreSQL would refuse are named, a setting that needs
a restart waits for one dbi may make, then takes it once; settings no longer declared
go back to the VM's."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from dbi import names
from devstack.stack import StackInfo
from tests.activities.lifecycle import SPEC, create, ready, uri, vmi_uid
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def show(kube_api: Any, namespace: str, setting: str) -> str:
    """SHOW ``setting`` in a new session as the app user."""
    with psycopg.connect(uri(kube_api, namespace, "db"), connect_timeout=3) as conn:
        row = conn.execute(psycopg.sql.SQL("SHOW {}").format(psycopg.sql.Identifier(setting)))
        return str(row.fetchone()[0])  # type: ignore[index]


def settings_condition(orchestrator: Orchestrator, namespace: str) -> dict[str, Any]:
    db = orchestrator.get(namespace, "db")
    conditions = db.get("status", {}).get("conditions", [])
    found: dict[str, Any] = next((c for c in conditions if c["type"] == "SettingsApplied"), {})
    fresh = found.get("observedGeneration") == db["metadata"]["generation"]
    return found if fresh else {}


async def test_parameters_apply_as_postgresql_takes_them(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    spec = {**SPEC, "postgresql": {"parameters": {"work_mem": "64MB"}}}
    db = await create(orchestrator, namespace, spec)
    assert db["status"]["observed"]["parameters"] == ["work_mem"]
    assert await asyncio.to_thread(show, kube_api, namespace, "work_mem") == "64MB"
    booted = vmi_uid(kube_api, namespace)

    # A reloadable change: no restart, and a session open across it stays open.
    with psycopg.connect(uri(kube_api, namespace, "db"), connect_timeout=3) as session:
        orchestrator.patch(
            namespace,
            "db",
            {"postgresql": {"parameters": {"work_mem": "32MB", "jit": "off"}}},
        )
        await ready(orchestrator, namespace)
        assert session.execute("SELECT 1").fetchone() == (1,)
    assert await asyncio.to_thread(show, kube_api, namespace, "work_mem") == "32MB"
    assert await asyncio.to_thread(show, kube_api, namespace, "jit") == "off"
    assert vmi_uid(kube_api, namespace) == booted

    # Values PostgreSQL would refuse: named, nothing written, the rest untouched.
    orchestrator.patch(
        namespace,
        "db",
        {"postgresql": {"parameters": {"work_mem": "4XB", "wrok_mem": "4MB"}}},
    )
    refused = await orchestrator.until(
        lambda: (
            settings_condition(orchestrator, namespace).get("reason") == "InvalidParameter"
            and settings_condition(orchestrator, namespace)
        ),
        what="SettingsApplied InvalidParameter",
    )
    assert refused["status"] == "False"
    assert "spec.postgresql.parameters.work_mem: '4XB'" in refused["message"]
    assert (
        "spec.postgresql.parameters.wrok_mem: PostgreSQL has no such setting"
        in (refused["message"])
    )
    assert orchestrator.condition(namespace, "db", "Stalled") == ("True", "InvalidParameter")
    assert await asyncio.to_thread(show, kube_api, namespace, "work_mem") == "32MB"

    # A setting that needs a restart, under resizePolicy Deferred: it waits, and says so.
    orchestrator.patch(
        namespace,
        "db",
        {
            "resizePolicy": "Deferred",
            "postgresql": {
                "parameters": {"work_mem": None, "wrok_mem": None, "shared_buffers": "160MB"}
            },
        },
    )
    await orchestrator.until(
        lambda: settings_condition(orchestrator, namespace).get("reason") == "RestartRequired",
        what="SettingsApplied RestartRequired",
    )
    observed = orchestrator.get(namespace, "db")["status"]["observed"]
    assert observed["pendingRestart"] == ["shared_buffers"]
    assert observed["parameters"] == ["jit", "shared_buffers"]
    described = await asyncio.to_thread(dbi, local_stack, "describe", "db", "-n", namespace)
    assert "  parameters   jit, shared_buffers (at the next restart: shared_buffers)" in (
        described.stdout.splitlines()
    ), described.stdout
    assert vmi_uid(kube_api, namespace) == booted
    assert await asyncio.to_thread(show, kube_api, namespace, "shared_buffers") == "256MB"
    # work_mem, no longer declared, is the VM's again (1/256 of 1Gi, at least 4MB).
    assert await asyncio.to_thread(show, kube_api, namespace, "work_mem") == "4MB"

    # The restart annotation lets dbi restart: once, and the setting is in force.
    orchestrator.kubectl(
        "annotate", "dbinstance", "db", "-n", namespace, f"{names.RESTART_REQUESTED_AT}=now"
    )
    await orchestrator.until(
        lambda: vmi_uid(kube_api, namespace) not in (None, booted), what="the restart"
    )
    restarted = vmi_uid(kube_api, namespace)
    db = await ready(orchestrator, namespace)
    assert db["status"]["observed"]["pendingRestart"] == []
    assert await asyncio.to_thread(show, kube_api, namespace, "shared_buffers") == "160MB"
    await asyncio.sleep(3)
    assert vmi_uid(kube_api, namespace) == restarted
