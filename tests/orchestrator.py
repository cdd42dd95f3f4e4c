"""Fixtures for tests of the whole orchestrator on the real local stack: images, a worker
with the real steps, and helpers to apply and wait for DBInstances."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client as k8s
from temporalio.client import Client, WorkflowHandle

from activities.infra.minutely import MINUTELY, ensure_minutely
from activities.infra.schedules import Schedules
from dbi import names
from dbi.config import Config
from dbi.messages import WorkflowInput
from dbi.spec import SUPPORTED_VERSIONS
from devstack import tools
from devstack.orchestrator import dev_images
from devstack.stack import StackInfo
from devstack.temporal import NAMESPACE
from tests import polling
from tests.stack import Kubectl
from tests.workflows.recorded import history_path
from watcher.wakeups import Wakeups
from watcher.watcher import Watcher
from workflows.dbinstance import DBInstanceWorkflow
from workflows.worker import ACTIVITY_THREADS, build_worker, step_activities

IMAGES_NAMESPACE = "dbi-images"


@pytest.fixture(scope="session")
def images(kube_api: Any, dbinstance_crd: str, local_stack: StackInfo) -> dict[int, str]:
    """Create the VirtualMachineImages the default configuration names, once."""
    core = k8s.CoreV1Api(kube_api)
    # The orchestrator's own namespace (it keeps each instance's admin credential there)
    # may exist already: deploy/'s tests apply it.
    for namespace in (IMAGES_NAMESPACE, Config().namespace):
        try:
            core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
        except k8s.ApiException as e:
            if e.status != 409:
                raise
    objects = k8s.CustomObjectsApi(kube_api)
    for image in dev_images():
        objects.create_namespaced_custom_object(
            "harvesterhci.io", "v1beta1", IMAGES_NAMESPACE, "virtualmachineimages", image
        )
    return {v: f"{IMAGES_NAMESPACE}/postgres-{v}" for v in SUPPORTED_VERSIONS}


@dataclass
class Orchestrator:
    client: Client
    task_queue: str
    kubectl: Kubectl

    async def start(self, namespace: str, name: str) -> WorkflowHandle[DBInstanceWorkflow, str]:
        """Start the instance's workflow as the watcher will (it does not exist yet)."""
        return await self.client.start_workflow(
            DBInstanceWorkflow.run,
            WorkflowInput(namespace=namespace, name=name),
            id=names.workflow_id(namespace, name),
            task_queue=self.task_queue,
        )

    def apply(
        self,
        namespace: str,
        name: str,
        spec: dict[str, Any],
        *,
        annotations: dict[str, str] | None = None,
    ) -> None:
        metadata: dict[str, Any] = {"name": name, "namespace": namespace}
        if annotations:
            metadata["annotations"] = annotations
        manifest = {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": metadata,
            "spec": spec,
        }
        self.kubectl("apply", "-f", "-", stdin=json.dumps(manifest))

    def wait_ready(self, namespace: str, name: str, *, timeout: int = 120) -> None:
        self.kubectl(
            "wait",
            "--for=condition=Ready",
            f"dbinstance/{name}",
            "-n",
            namespace,
            f"--timeout={timeout}s",
        )

    def patch(self, namespace: str, name: str, spec: dict[str, Any]) -> None:
        body = json.dumps({"spec": spec})
        self.kubectl("patch", "dbinstance", name, "-n", namespace, "--type=merge", "-p", body)

    def condition(self, namespace: str, name: str, kind: str) -> tuple[str, str] | None:
        """Return (status, reason) of a condition, or None when it is absent."""
        for c in self.get(namespace, name).get("status", {}).get("conditions", []):
            if c["type"] == kind:
                return (c["status"], c["reason"])
        return None

    async def until(self, check: Any, *, timeout: float = 120, what: str = "it") -> Any:
        """Wait (without blocking the worker's event loop) until ``check()`` is truthy."""
        return await polling.until(check, timeout=timeout, what=what)

    async def delete(self, namespace: str, name: str, *, timeout: float = 120) -> None:
        """Delete a DBInstance and wait until it is gone (its teardown ran)."""
        self.kubectl("delete", "dbinstance", name, "-n", namespace, "--wait=false")

        def gone() -> bool:
            listed = self.kubectl("get", "dbinstance", "-n", namespace, "-o", "name").stdout
            return f"/{name}" not in listed

        await self.until(gone, timeout=timeout, what=f"{namespace}/{name} torn down")

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        out = self.kubectl("get", "dbinstance", name, "-n", namespace, "-o", "json").stdout
        return dict(json.loads(out))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def orchestrator(
    temporal_client: Client, local_stack: StackInfo, images: dict[int, str], kubectl: Kubectl
) -> AsyncIterator[Orchestrator]:
    """Run a worker with every real activity against the local stack, for the session."""
    queue = f"dbi-test-{uuid.uuid4().hex[:8]}"
    schedules = Schedules(temporal_client, asyncio.get_running_loop(), queue)
    # As a worker process does: deleted DBBackups (a test's namespace deleted) let go,
    # and WAL archived.
    assert await ensure_minutely(temporal_client, queue) == []
    with ThreadPoolExecutor(max_workers=ACTIVITY_THREADS) as executor:
        worker = build_worker(
            temporal_client,
            step_activities(local_stack.kubeconfig, schedules=schedules),
            task_queue=queue,
            executor=executor,
        )
        async with worker:
            yield Orchestrator(temporal_client, queue, kubectl)
    for schedule_id_of, _, _ in MINUTELY:  # none fires on for a queue nobody polls
        await temporal_client.get_schedule_handle(schedule_id_of(queue)).delete()


async def _listed(w: Watcher) -> bool:
    return w.problem() is None


@asynccontextmanager
async def watching(
    orchestrator: Orchestrator, kube_api: Any, namespace: str
) -> AsyncIterator[Watcher]:
    """Run a watcher for ``namespace``, signaling the orchestrator's task queue."""
    w = Watcher(
        api=kube_api,
        client=orchestrator.client,
        wakeups=Wakeups(orchestrator.client, task_queue=orchestrator.task_queue),
        namespaces=frozenset({namespace}),
        resync_seconds=2.0,
    )
    task = asyncio.create_task(w.run())
    try:
        # Every watch has listed (what it sees from now on comes as events).
        await polling.until_awaited(lambda: _listed(w), what="the watcher's watches listing")
        yield w
    finally:
        w.stop.set()
        await asyncio.wait_for(task, 10)


@pytest_asyncio.fixture(loop_scope="session")
async def watcher(
    orchestrator: Orchestrator, kube_api: Any, namespace: str
) -> AsyncIterator[Watcher]:
    """Run a watcher for this test's namespace, signaling the orchestrator's task queue."""
    async with watching(orchestrator, kube_api, namespace) as w:
        yield w


@pytest_asyncio.fixture(autouse=True, loop_scope="session")
async def recorded_on_the_stack(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """With DBI_RECORD_HISTORIES set, keep the history of every DBInstance workflow a test
    of the orchestrator ran in its namespace for the replay test
    (``tests/workflows/histories/real-stack-<test>.json``): the real steps, their
    failures and the real server's task grouping, which stub runs do not have."""
    wanted = {"orchestrator", "namespace"} <= set(request.fixturenames)
    if not (os.environ.get("DBI_RECORD_HISTORIES") and wanted):
        yield
        return
    orchestrator: Orchestrator = request.getfixturevalue("orchestrator")
    namespace: str = request.getfixturevalue("namespace")
    yield
    prefix = names.workflow_id(namespace, "")
    query = f"WorkflowType='{names.WORKFLOW_TYPE}' AND TaskQueue='{orchestrator.task_queue}'"
    slug = "real-stack-" + re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")
    async for run in orchestrator.client.list_workflows(query):
        if run.id.startswith(prefix):
            handle = orchestrator.client.get_workflow_handle(run.id, run_id=run.run_id)
            history = await handle.fetch_history()
            history_path(slug).write_text(history.to_json())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """When a test of the orchestrator fails, add what the stack looked like to its report:
    its namespace's DBInstances (conditions) and Events, the workflows still running and
    the tail of each instance's history. A flake seen once in CI is then explained by its
    own output."""
    outcome = yield
    report = outcome.get_result()
    found = getattr(item, "funcargs", {})  # every fixture set up for it, used or not
    if report.when != "call" or not report.failed or "orchestrator" not in found:
        return
    try:
        text = stack_at_failure(found["local_stack"], found["kubectl"], found.get("namespace"))
    except Exception as e:  # the report must not fail because the stack did
        text = f"(could not describe the stack: {e!r})"
    report.sections.append(("stack at failure", text))


def stack_at_failure(stack: StackInfo, kubectl: Kubectl, namespace: str | None) -> str:
    def temporal(*args: str) -> str:
        """The Temporal CLI's answer (or its complaint) about the stack's server."""
        argv = [str(tools.venv_tool("temporal")), *args]
        argv += ["--address", stack.temporal_address, "--namespace", NAMESPACE]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        return (done.stdout + done.stderr).strip()

    where = ["-n", namespace] if namespace else ["-A"]
    lines = []
    listed = kubectl("get", "dbinstance", *where, "-o", "json", check=False).stdout or "{}"
    for obj in json.loads(listed).get("items", []):
        meta, status = obj["metadata"], obj.get("status") or {}
        lines.append(f"DBInstance {meta['namespace']}/{meta['name']}: {status.get('phase')}")
        for c in status.get("conditions") or []:
            lines.append(
                f"  {c['type']}={c['status']} {c.get('reason', '')} "
                f"{c.get('lastTransitionTime', '')}: {c.get('message', '')}"
            )
        workflow = names.workflow_id(meta["namespace"], meta["name"])
        described = temporal("workflow", "describe", "-w", workflow)
        lines.append(f"  workflow {workflow} (pending activities, last failure):")
        lines.extend(
            f"    {line}" for line in described.splitlines() if "SearchAttributes" not in line
        )
        history = temporal("workflow", "show", "-w", workflow)
        lines.append("  its last 15 events:")
        lines.extend(f"    {line}" for line in history.splitlines()[-15:])
    if namespace:
        events = kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp", check=False)
        lines.append("Events:")
        lines.extend(f"  {line}" for line in events.stdout.splitlines()[-30:])
    query = "ExecutionStatus='Running'"
    running = temporal("workflow", "count", "--query", query)
    lines.append(f"Workflows running on the server: {running}")
    return "\n".join(lines)
