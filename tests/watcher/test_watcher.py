"""The watcher on the real control plane and Temporal dev server."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey

from dbi import names
from dbi.messages import TASK_TIMEOUT, Progress
from tests.orchestrator import Orchestrator
from tests.polling import until_awaited
from tests.watcher.wakes import _wakes, wakes
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

SPEC = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "healthCheckInterval": "10s",
}


async def test_creating_an_instance_starts_its_workflow(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str
) -> None:
    """A new DBInstance gets its workflow, with its id and search attributes."""
    orchestrator.apply(namespace, "db", SPEC)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))

    async def started() -> Any:
        try:
            return await handle.describe()
        except Exception:
            return None

    described = await until_awaited(started, what="the workflow start")
    attributes = described.typed_search_attributes
    assert attributes.get(SearchAttributeKey.for_keyword("DbiNamespace")) == namespace
    assert attributes.get(SearchAttributeKey.for_keyword("DbiName")) == "db"
    # Room for a pass's local activities when many instances queue for the worker.
    config = described.raw_description.execution_config
    assert config.default_workflow_task_timeout.ToTimedelta() == TASK_TIMEOUT


async def test_every_spec_patch_reaches_the_workflow_as_a_wake(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """Each of 50 patches to a Ready instance, spaced past the coalescing window, is a
    wake naming its generation: none is lost. How fast is the bench's to say (reaction
    p99, docs/benchmarks.md); the test prints what it saw."""
    orchestrator.apply(namespace, "db", SPEC)
    workflow_id = names.workflow_id(namespace, "db")
    objects = k8s.CustomObjectsApi(kube_api)
    await asyncio.to_thread(orchestrator.wait_ready, namespace, "db")
    latencies = []
    for n in range(50):
        patch = {"spec": {"healthCheckInterval": f"{11 + n}s"}}  # a new generation
        patched = time.time()
        applied = await asyncio.to_thread(
            objects.patch_namespaced_custom_object,
            names.GROUP,
            names.VERSION,
            namespace,
            names.PLURAL,
            "db",
            patch,
        )
        generation = cast(dict[str, Any], applied)["metadata"]["generation"]
        woken = await until_awaited(
            _woken(orchestrator.client, workflow_id, generation), what=f"generation {generation}"
        )
        latencies.append(woken - patched)
        await asyncio.sleep(0.3)
    latencies.sort()
    p50, p99 = latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99) - 1]
    print(f"patch-to-wake p50 {p50:.3f}s p99 {p99:.3f}s max {latencies[-1]:.3f}s")
    assert len(latencies) == 50


def _woken(client: Client, workflow_id: str, generation: int) -> Any:
    """A check for the time of the first wake that carries ``generation`` (or later)."""

    async def check() -> float | None:
        try:
            found = await _wakes(client, workflow_id)
        except Exception:
            return None
        times = [when for when, wake in found if (wake.get("generation") or 0) >= generation]
        return times[0].replace(tzinfo=UTC).timestamp() if times else None

    return check


async def _has_wakes(client: Client, workflow_id: str, n: int) -> list[tuple[datetime, str]] | None:
    try:
        found = await wakes(client, workflow_id)
    except Exception:
        return None
    return found if len(found) >= n else None


async def test_deleting_an_owned_secret_wakes_the_owner(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """A child Secret's deletion is a wake of its instance, naming the Secret."""
    orchestrator.apply(namespace, "db", SPEC)
    core = k8s.CoreV1Api(kube_api)
    secret = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(name="db-extra", labels={names.INSTANCE_LABEL: "db"})
    )
    core.create_namespaced_secret(namespace, secret)
    # Once Ready, nothing else changes, so no other event folds into the deletion's wake.
    await asyncio.to_thread(orchestrator.wait_ready, namespace, "db")
    core.delete_namespaced_secret("db-extra", namespace)

    async def deleted() -> bool:
        found = await _has_wakes(orchestrator.client, names.workflow_id(namespace, "db"), 1)
        return any("Secret db-extra deleted" in reason for _, reason in found or [])

    await until_awaited(deleted, what="a wake for the deleted Secret")


async def test_a_storm_of_patches_is_coalesced_and_the_last_spec_wins(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """1,000 rapid patches make far fewer signals than events; the last spec is converged."""
    orchestrator.apply(namespace, "db", SPEC)
    workflow_id = names.workflow_id(namespace, "db")
    await until_awaited(lambda: _has_wakes(orchestrator.client, workflow_id, 1), what="first wake")
    objects = k8s.CustomObjectsApi(kube_api)
    seen_before = watcher.wakeups.counters.events_seen
    sent_before = watcher.wakeups.counters.signals_sent

    def storm() -> None:
        for n in range(1000):
            objects.patch_namespaced_custom_object(
                names.GROUP,
                names.VERSION,
                namespace,
                names.PLURAL,
                "db",
                {"spec": {"healthCheckInterval": f"{10 + n}s"}},
            )

    await asyncio.to_thread(storm)

    async def all_seen() -> bool:
        return watcher.wakeups.counters.events_seen - seen_before >= 1000

    await until_awaited(all_seen, timeout=60, what="the watcher seeing all 1,000 patches")
    await asyncio.sleep(watcher.wakeups.window * 2)
    events = watcher.wakeups.counters.events_seen - seen_before
    signals = watcher.wakeups.counters.signals_sent - sent_before
    print(f"storm: {events} events, {signals} signals")
    assert events >= 1000 and signals * 5 < events
    current = cast(
        dict[str, Any],
        objects.get_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, "db"
        ),
    )
    generation = current["metadata"]["generation"]
    handle = orchestrator.client.get_workflow_handle(workflow_id)

    async def observed_last() -> bool:
        progress: Progress = await handle.query("progress", result_type=Progress)
        return bool(progress.generation == generation)

    await until_awaited(observed_last, timeout=60, what="a pass of the last generation")


async def test_resync_restarts_a_workflow_terminated_by_hand(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str
) -> None:
    """An instance whose workflow was terminated gets a running one again at the next resync."""
    orchestrator.apply(namespace, "db", SPEC)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    await until_awaited(lambda: _has_wakes(orchestrator.client, handle.id, 1), what="first wake")
    await handle.terminate("by hand")

    async def running_again() -> bool:
        described = await orchestrator.client.get_workflow_handle(handle.id).describe()
        return described.status == WorkflowExecutionStatus.RUNNING

    await until_awaited(running_again, timeout=15, what="a running workflow after resync")
