"""Outages the watcher rides out: Temporal stopped for 90 s, the API server for 40 s,
and a Lease lost to another replica.

The processes are stopped with SIGSTOP, as a hung VM or a long GC pause stops them: the
TCP connections stay open and nothing answers. Each is continued in a ``finally``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from devstack import tools
from devstack.stack import StackInfo
from tests.activities.lifecycle import SPEC, ready
from tests.orchestrator import Orchestrator
from tests.polling import until, until_awaited
from tests.probes import probe
from tests.watcher.replicas import watcher_process
from watcher.leader import LeaderElection
from watcher.wakeups import WINDOW_SECONDS, Wakeups
from watcher.watcher import Watcher

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("dbinstance_crd")]

TEMPORAL_OUTAGE_SECONDS = 90.0
API_OUTAGE_SECONDS = 40.0


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP a stack process's group; SIGCONT it on the way out, whatever happens."""
    os.killpg(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(pid, signal.SIGCONT)


async def test_a_temporal_outage_of_90s_is_ridden_out_and_shown(
    local_stack: StackInfo,
    orchestrator: Orchestrator,
    namespace: str,
    tmp_path: Path,
) -> None:
    """Temporal stopped for 90 s: the watcher process lives on, /readyz fails naming
    Temporal and dbi_check_ok{check="temporal"} is 0; an instance created meanwhile
    is signaled once Temporal is back (the wake retried with back-off) and becomes
    Ready; /readyz is 200 again."""
    port = tools.free_port()
    log = tmp_path / "watcher.log"
    env = {"DBI_METRICS_PORT": str(port), "DBI_TASK_QUEUE": orchestrator.task_queue}
    with watcher_process(local_stack, namespace, log, **env) as watcher:
        await until(lambda: probe(port, "/readyz")[0] == 200, timeout=60, what="ready")
        with stopped(local_stack.pids["temporal"]):
            began = time.monotonic()
            orchestrator.apply(namespace, "db", SPEC)
            _, body = await until(
                lambda: (found := probe(port, "/readyz"))[0] == 503 and found,
                timeout=40,
                what="/readyz failing",
            )
            assert "fail temporal: Temporal has not answered for" in body, body
            assert "ok watches" in body, body  # the API server is fine meanwhile
            metrics = probe(port, "/metrics")[1]
            assert 'dbi_check_ok{check="temporal"} 0.0' in metrics
            assert probe(port, "/livez")[0] == 200
            await asyncio.sleep(max(0.0, TEMPORAL_OUTAGE_SECONDS - (time.monotonic() - began)))
            assert watcher.poll() is None, "the watcher died during the outage"
        await until(lambda: probe(port, "/readyz")[0] == 200, timeout=60, what="ready again")
        await ready(orchestrator, namespace)
        assert watcher.poll() is None
    text = log.read_text()
    assert "Temporal does not answer" in text
    assert "wake of" in text and "failed" in text  # retried, and logged


async def test_an_api_server_outage_is_ridden_out_and_shown(
    local_stack: StackInfo, namespace: str, kube_api: Any, temporal_client: Client
) -> None:
    """The API server stopped for 40 s: the watcher's watches go silent, its readiness
    says which and for how long; once the server answers again the watches resume and a
    change made then is signaled."""
    watcher = Watcher(
        api=kube_api,
        client=temporal_client,
        wakeups=Wakeups(temporal_client, task_queue=f"outage-{namespace}"),
        namespaces=frozenset({namespace}),
        watch_seconds=3,
    )
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: watcher.problem() is None, timeout=30, what="watches live")
        with stopped(local_stack.pids["controlplane"]):
            problem = await until(
                watcher.problem, timeout=API_OUTAGE_SECONDS, what="a watch reported down"
            )
            assert "watch has not been live for" in problem, problem
            await asyncio.sleep(max(0.0, API_OUTAGE_SECONDS - 30))
        await until(lambda: watcher.problem() is None, timeout=90, what="watches live again")
        create_db(kube_api, namespace)
        workflow_id = names.workflow_id(namespace, "db")
        deadline = time.monotonic() + 30
        while not await _started(temporal_client, workflow_id):  # signal-with-start
            assert time.monotonic() < deadline, "the change after the outage was not signaled"
            await asyncio.sleep(0.5)
    finally:
        watcher.stop.set()
        await asyncio.wait_for(task, 15)
        await _terminate(temporal_client, names.workflow_id(namespace, "db"))


def create_db(kube_api: Any, namespace: str) -> None:
    """Create the DBInstance ``db`` (for a watcher to see; no worker converges it)."""
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db"},
        "spec": SPEC,
    }
    k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, body
    )


async def _terminate(client: Client, workflow_id: str) -> None:
    """End the workflow the watcher started (no worker polls its queue)."""
    try:
        await client.get_workflow_handle(workflow_id).terminate("test over")
    except Exception:  # never started: nothing to end
        return


async def test_a_replica_that_loses_its_lease_stops_watching_and_signaling(
    namespace: str, kube_api: Any, temporal_client: Client
) -> None:
    """Another replica takes the Lease (this one's renewals were late, say): this one
    steps down at its next renewal, ends its watches, reports itself standby, and
    signals nothing more."""
    election = LeaderElection(api=kube_api, namespace=namespace, identity="a", duration=3)
    watcher = Watcher(
        api=kube_api,
        client=temporal_client,
        wakeups=Wakeups(temporal_client, task_queue=f"lease-{namespace}"),
        namespaces=frozenset({namespace}),
        election=election,
        watch_seconds=3,
    )

    def own_watches() -> list[str]:
        """This watcher's watch threads (each names its namespace; another test's
        watcher may still be ending its own)."""
        return [
            t.name
            for t in threading.enumerate()
            if t.name.startswith("watch-") and t.name.endswith(f" in {namespace}")
        ]

    task = asyncio.create_task(watcher.run())
    coordination = k8s.CoordinationV1Api(kube_api)
    try:
        await until(lambda: watcher.problem() is None and watcher.watches, timeout=30, what="lead")
        assert own_watches(), "the test looks for threads under another name"
        lease: Any = coordination.read_namespaced_lease("dbi-watcher", namespace)
        lease.spec.holder_identity = "b"
        lease.spec.lease_duration_seconds = 600
        lease.spec.renew_time = datetime.now(UTC)
        coordination.replace_namespaced_lease("dbi-watcher", namespace, lease)
        await until(lambda: not election.leading.is_set(), timeout=10, what="stepping down")
        try:
            await until(lambda: not own_watches(), timeout=15, what="every watch thread ended")
        except AssertionError as e:
            raise AssertionError(f"{e}: {own_watches()} still run") from None
        assert watcher.watches == {}
        assert watcher.problem() is None  # a standby that reaches the API server is ready

        # The instance's ADDED event reaches a watch of the test's own (a watch begun
        # after the create sees it as ADDED too); a standby still watching would have
        # seen it as well, and signaled within its coalescing window.
        create_db(kube_api, namespace)
        await asyncio.to_thread(_added, kube_api, namespace, "db")
        await asyncio.sleep(4 * WINDOW_SECONDS)
        workflow_id = names.workflow_id(namespace, "db")
        assert await _started(temporal_client, workflow_id) is None, "a standby signaled"
        # This replica leads again ("b" lets its Lease lapse): it lists and signals, and the
        # workflow starts after the hand-back, never before.
        lease = coordination.read_namespaced_lease("dbi-watcher", namespace)
        lease.spec.renew_time = datetime(2000, 1, 1, microsecond=1, tzinfo=UTC)  # a MicroTime
        lease.spec.lease_duration_seconds = 1
        handed_back = datetime.now(UTC)
        coordination.replace_namespaced_lease("dbi-watcher", namespace, lease)
        started = await until_awaited(
            lambda: _started(temporal_client, workflow_id), what="the leader's start"
        )
        assert started >= handed_back, "a replica that lost its Lease signaled"
    finally:
        watcher.stop.set()
        await asyncio.wait_for(task, 15)
        await _terminate(temporal_client, names.workflow_id(namespace, "db"))


def _added(kube_api: Any, namespace: str, name: str) -> None:
    """Return once a watch of the namespace's DBInstances sees ``name`` added."""
    objects = k8s.CustomObjectsApi(kube_api)
    stream = k8s_watch.Watch()
    for event in stream.stream(
        objects.list_namespaced_custom_object,
        names.GROUP,
        names.VERSION,
        namespace,
        names.PLURAL,
        timeout_seconds=30,
    ):
        if event["type"] == "ADDED" and event["object"]["metadata"]["name"] == name:
            stream.stop()
            return
    raise AssertionError(f"no ADDED event for {namespace}/{name}")


async def _started(client: Client, workflow_id: str) -> datetime | None:
    """When the workflow started; None while there is none (any other error raises)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as e:
        if e.status is RPCStatusCode.NOT_FOUND:
            return None
        raise
    return described.start_time
