"""Maintenance windows on the stack: a restart a resize, a setting or a repave needs
waits for the window (on the stack's clock), then happens once; the restart annotation
overrides it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dbi import names
from tests.activities.lifecycle import SPEC, create, custom, ready, sql, vmi_uid
from tests.orchestrator import IMAGES_NAMESPACE, Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def condition(orchestrator: Orchestrator, namespace: str, kind: str) -> dict[str, Any]:
    conditions = orchestrator.get(namespace, "db").get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == kind), {})


def next_minute(at_least: timedelta) -> datetime:
    """The first whole minute (UTC) at least ``at_least`` from now."""
    soon = datetime.now(UTC) + at_least
    return soon.replace(second=0, microsecond=0) + timedelta(minutes=1)


async def test_a_resize_restart_waits_for_the_window_then_happens(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A CPU change beyond hot-plug and a shared_buffers (a restart setting) under
    resizePolicy Restart, with a window opening at the next minute: both held
    (SizeSynced and SettingsApplied False MaintenanceWindow, naming the opening), the VM
    untouched; at the opening the VM restarts once, with the new size and setting, no
    wake needed."""
    await create(orchestrator, namespace)
    before = vmi_uid(kube_api, namespace)
    opens = next_minute(timedelta(seconds=20))
    window = {"start": opens.strftime("%H:%M"), "duration": "1h"}
    orchestrator.patch(
        namespace,
        "db",
        {
            "maintenance": {"window": window},
            "resources": {"cpu": 6},
            "postgresql": {"parameters": {"shared_buffers": "160MB"}},
        },
    )
    await orchestrator.until(
        lambda: (
            condition(orchestrator, namespace, "SizeSynced").get("reason") == "MaintenanceWindow"
        ),
        what="SizeSynced MaintenanceWindow",
    )
    held = condition(orchestrator, namespace, "SizeSynced")
    assert held["status"] == "False"
    assert opens.strftime("%Y-%m-%dT%H:%M:%SZ") in held["message"]
    await orchestrator.until(
        lambda: (
            condition(orchestrator, namespace, "SettingsApplied").get("reason")
            == "MaintenanceWindow"
        ),
        what="SettingsApplied MaintenanceWindow",
    )
    assert orchestrator.get(namespace, "db")["status"]["observed"]["pendingRestart"] == [
        "shared_buffers"
    ]
    assert condition(orchestrator, namespace, "Ready")["status"] == "False"
    assert vmi_uid(kube_api, namespace) == before
    assert await asyncio.to_thread(sql, kube_api, namespace, "SHOW dbi.vm_cpus") == ("1",)

    await orchestrator.until(
        lambda: vmi_uid(kube_api, namespace) not in (None, before),
        what="the restart at the opening",
        timeout=(opens - datetime.now(UTC)).total_seconds() + 60,
    )
    restarted = custom(kube_api, namespace, "virtualmachineinstances", "db")
    created = datetime.fromisoformat(restarted["metadata"]["creationTimestamp"])
    assert created >= opens
    db = await ready(orchestrator, namespace)
    assert db["status"]["observed"]["pendingRestart"] == []
    assert await asyncio.to_thread(sql, kube_api, namespace, "SHOW dbi.vm_cpus") == ("6",)
    assert await asyncio.to_thread(sql, kube_api, namespace, "SHOW shared_buffers") == ("160MB",)
    await asyncio.sleep(3)  # one restart took both: no second one follows
    assert vmi_uid(kube_api, namespace) == restarted["metadata"]["uid"]


async def test_a_held_repave_goes_ahead_on_the_restart_annotation(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A repave waiting for tomorrow's window: its new root disk is made and the VM
    points at it, but it does not restart; dbi.dev/restart-requested-at restarts it now,
    and the instance runs the new build."""
    old, new = f"{IMAGES_NAMESPACE}/postgres-16.13", f"{IMAGES_NAMESPACE}/postgres-16.15"
    tomorrow = datetime.now(UTC) + timedelta(hours=20)
    window = {"start": tomorrow.strftime("%H:%M"), "duration": "1h"}
    spec = {**SPEC, "version": 16, "image": old, "maintenance": {"window": window}}
    await create(orchestrator, namespace, spec)
    before = vmi_uid(kube_api, namespace)
    orchestrator.patch(namespace, "db", {"image": new})
    await orchestrator.until(
        lambda: (
            condition(orchestrator, namespace, "RootDiskCurrent").get("reason")
            == "MaintenanceWindow"
        ),
        what="RootDiskCurrent MaintenanceWindow",
    )
    await asyncio.sleep(2)
    assert vmi_uid(kube_api, namespace) == before
    db = orchestrator.get(namespace, "db")
    assert db["status"]["observed"]["postgresVersion"] == "16.13"
    # The pass went on past the held restart: the later steps checked this generation.
    for kind in ("DatabaseHealthy", "AccessReady", "BackupScheduled"):
        found = condition(orchestrator, namespace, kind)
        assert found["status"] == "True", found
        assert found["observedGeneration"] == db["metadata"]["generation"], found

    orchestrator.kubectl(
        "annotate", "dbinstance", "db", "-n", namespace, f"{names.RESTART_REQUESTED_AT}=now"
    )

    def repaved() -> bool:
        observed = orchestrator.get(namespace, "db").get("status", {}).get("observed", {})
        return bool(observed.get("postgresVersion") == "16.15")

    await orchestrator.until(repaved, what="PostgreSQL 16.15 running", timeout=180)
    db = await ready(orchestrator, namespace)
    assert db["status"]["served"]["restartRequestedAt"] == "now"
    assert vmi_uid(kube_api, namespace) != before
