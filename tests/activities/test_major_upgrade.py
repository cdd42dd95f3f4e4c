"""Major upgrades on the stack: spec.version 16 → 17 runs pg_upgrade in the guest and
keeps every row; the old data goes only after the new server answered; a check that
fails is rolled back with nothing lost; a worker killed mid-upgrade is replaced and the
upgrade completes."""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from activities.infra import manifests
from activities.infra.kube import Kube
from activities.steps import upgrade
from dbi import names, pipeline
from dbi.config import ADMIN_USER
from dbi.upgrades import UpgradeRequest, UpgradeResult
from devstack.stack import StackInfo
from tests.activities.crashing import heartbeating, worker
from tests.activities.lifecycle import SPEC, create, custom, events_of, ready, sql, uri
from tests.activities.logins import admin_credential
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

V16 = {**SPEC, "version": 16}


def admin_sql(kube_api: Any, orchestrator: Orchestrator, namespace: str, statement: str) -> Any:
    """One fixed statement as dbi's admin, over the instance's verified TLS."""
    password = admin_credential(kube_api, orchestrator, namespace)["password"]
    with psycopg.connect(
        uri(kube_api, namespace, "db"),
        user=ADMIN_USER,
        password=password,
        dbname="postgres",
        connect_timeout=3,
    ) as conn:
        return conn.execute(statement.encode()).fetchone()


def data_major(kube_api: Any, namespace: str) -> str | None:
    claim = k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim("db-data", namespace)
    annotations = (claim.metadata.annotations if claim.metadata else None) or {}
    return annotations.get(names.DATA_MAJOR_ANNOTATION)


def observed_version(orchestrator: Orchestrator, namespace: str) -> str:
    status = orchestrator.get(namespace, "db").get("status", {})
    return str(status.get("observed", {}).get("postgresVersion", ""))


async def upgraded(orchestrator: Orchestrator, namespace: str, major: str) -> dict[str, Any]:
    try:
        await orchestrator.until(
            lambda: observed_version(orchestrator, namespace).startswith(f"{major}."),
            what=f"PostgreSQL {major} running",
            timeout=240,
        )
    except AssertionError as e:
        conditions = orchestrator.get(namespace, "db").get("status", {}).get("conditions", [])
        held = [f"{c['type']}={c['status']} {c['reason']}: {c['message']}" for c in conditions]
        raise AssertionError(f"{e}; conditions: {held}") from None
    return await ready(orchestrator, namespace)


def old_data_there(kube_api: Any, orchestrator: Orchestrator, namespace: str) -> bool:
    """Whether pg_upgrade's script (and so the old data directory) is beside the data."""
    row = admin_sql(
        kube_api,
        orchestrator,
        namespace,
        # A record IS NOT NULL only when every field is; its size is when the file is.
        "SELECT (pg_stat_file('../delete_old_cluster.sh', true)).size IS NOT NULL",
    )
    return bool(row[0])


async def test_a_major_upgrade_keeps_every_row_and_removes_the_old_data(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    await create(orchestrator, namespace, V16)
    assert data_major(kube_api, namespace) == "16"
    await asyncio.to_thread(
        sql, kube_api, namespace, "CREATE TABLE kept AS SELECT generate_series(1, 1000) AS n"
    )
    root_before = manifests.root_of(custom(kube_api, namespace, "virtualmachines", "db"))

    orchestrator.patch(namespace, "db", {"version": 17})
    db = await upgraded(orchestrator, namespace, "17")

    assert db["status"]["observed"]["postgresVersion"].startswith("17.")
    assert await asyncio.to_thread(sql, kube_api, namespace, "SELECT count(*) FROM kept") == (1000,)
    assert data_major(kube_api, namespace) == "17"
    assert not await asyncio.to_thread(old_data_there, kube_api, orchestrator, namespace)
    reasons = [r for r, _ in events_of(kube_api, namespace)]
    assert "UpgradeStarted" in reasons and "Upgraded" in reasons
    # The pass after: the old major's root disk goes (repave), and planner statistics are
    # there again (verify ran ANALYZE).
    await orchestrator.until(
        lambda: (
            k8s.CoreV1Api(kube_api)
            .list_namespaced_persistent_volume_claim(
                namespace, field_selector=f"metadata.name={root_before}"
            )
            .items
            == []
        ),
        what="the old root disk deleted",
    )
    analyzed = await asyncio.to_thread(
        sql, kube_api, namespace, "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables"
    )
    assert analyzed == (True,)


async def test_a_failing_check_is_rolled_back_and_a_new_attempt_upgrades(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A column of a reg* type (which pg_upgrade refuses) fails the check: the old data
    boots again on its old root disk with every row, the instance stalls naming the
    check; dropped, a new reconcile request upgrades it."""
    await create(orchestrator, namespace, V16)
    await asyncio.to_thread(
        sql, kube_api, namespace, "CREATE TABLE kept AS SELECT generate_series(1, 100) AS n"
    )
    await asyncio.to_thread(sql, kube_api, namespace, "CREATE TABLE blocker (p regproc)")
    root_before = manifests.root_of(custom(kube_api, namespace, "virtualmachines", "db"))

    orchestrator.patch(namespace, "db", {"version": 17})
    stalled = ("True", "UpgradeCheckFailed")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled UpgradeCheckFailed",
        timeout=240,
    )
    conditions = orchestrator.get(namespace, "db")["status"]["conditions"]
    message = next(c["message"] for c in conditions if c["type"] == "VersionCurrent")
    assert "reg*" in message and "old data runs as before" in message
    assert manifests.root_of(custom(kube_api, namespace, "virtualmachines", "db")) == root_before
    assert await asyncio.to_thread(sql, kube_api, namespace, "SHOW server_version_num") < (
        "170000",
    )
    assert await asyncio.to_thread(sql, kube_api, namespace, "SELECT count(*) FROM kept") == (100,)
    assert data_major(kube_api, namespace) == "16"
    assert "UpgradeRolledBack" in [r for r, _ in events_of(kube_api, namespace)]

    await asyncio.to_thread(sql, kube_api, namespace, "DROP TABLE blocker")
    orchestrator.kubectl(
        "annotate",
        "dbinstance",
        "db",
        "-n",
        namespace,
        f"{names.RECONCILE_REQUESTED_AT}=after-dropping-blocker",
    )
    await upgraded(orchestrator, namespace, "17")
    assert await asyncio.to_thread(sql, kube_api, namespace, "SELECT count(*) FROM kept") == (100,)


async def test_a_worker_killed_mid_upgrade_is_replaced_and_the_upgrade_completes(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
    tmp_path: Path,
) -> None:
    """The upgrade runs on a worker process that is SIGKILLed while it waits for the
    guest; another worker takes the attempt over (without restarting the VM again) and
    the upgrade completes. The instance's own workflow, paused meanwhile, then finds it
    done."""
    await create(orchestrator, namespace, V16)
    await asyncio.to_thread(
        sql, kube_api, namespace, "CREATE TABLE kept AS SELECT generate_series(1, 500) AS n"
    )
    orchestrator.kubectl(
        "annotate", "dbinstance", "db", "-n", namespace, f"{names.PAUSED_ANNOTATION}=true"
    )
    orchestrator.patch(namespace, "db", {"version": 17})
    instance = Kube(kube_api).instance(namespace, "db")
    assert instance is not None
    workflow_id = upgrade.workflow_id(instance, 17)
    queue = f"upgrade-crash-{uuid.uuid4().hex[:8]}"
    first = worker(local_stack, queue, tmp_path / "first.log")
    handle = await orchestrator.client.start_workflow(
        names.UPGRADE_WORKFLOW_TYPE,
        UpgradeRequest(
            namespace=namespace, name="db", uid=instance.uid, from_major=16, to_major=17
        ),
        id=workflow_id,
        task_queue=queue,
        result_type=UpgradeResult,
    )
    try:
        await asyncio.wait_for(
            heartbeating(orchestrator.client, workflow_id, pipeline.RUN_UPGRADE), 120
        )
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        other = worker(local_stack, queue, tmp_path / "other.log")
        try:
            result = await asyncio.wait_for(handle.result(), 300)
        finally:
            other.terminate()
            other.wait(60)
    finally:
        if first.poll() is None:
            first.kill()
    assert result.ok, result
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the killed attempt was not retried"

    orchestrator.kubectl(
        "annotate", "dbinstance", "db", "-n", namespace, f"{names.PAUSED_ANNOTATION}-"
    )
    await upgraded(orchestrator, namespace, "17")
    assert await asyncio.to_thread(sql, kube_api, namespace, "SELECT count(*) FROM kept") == (500,)
