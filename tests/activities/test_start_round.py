"""A worker that starts looks at the Ready instances another worker had settled.

A settled instance's workflow waits RECHECK_NET (6 h) for its own pass while the worker
that settled it re-checks it (activities.rechecks). When that worker goes (alone on its
task queue, so it hands nothing on: test_hand_off.py), the one that starts next has
settled nothing: its start round asks each workflow for a pass now (``Wake.settle``),
so the instance is looked at within an interval, not hours.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from dbi.messages import Progress, WorkflowInput
from devstack import tools
from devstack.stack import StackInfo
from tests.activities.test_worker_crash import SPEC, worker
from tests.probes import probe
from tests.stack import Kubectl
from workflows.dbinstance import DBInstanceWorkflow

pytestmark = pytest.mark.stack

SETTLED = "the worker re-checks"  # the settled wait's summary (workflows.waiting)
QUERY_SECONDS = 5.0
# A pass a worker asks for moments after another stopped may wait out that one's
# sticky queue (DBI_STICKY_SECONDS, 60 s) before a worker still polling runs it.
PASS_SECONDS = 150.0


async def progress(handle: WorkflowHandle[DBInstanceWorkflow, str]) -> Progress | None:
    """The workflow's progress, or None when no answer comes in QUERY_SECONDS.

    A query waits for the workflow's pending task, and a task the server still sends
    to a stopped worker's sticky queue (it counts a poller for 10 s after the last)
    waits out DBI_STICKY_SECONDS there: as ``dbi describe`` does, the caller asks
    again rather than hang on it.
    """
    try:
        found: Progress = await handle.query(
            names.PROGRESS, result_type=Progress, rpc_timeout=timedelta(seconds=QUERY_SECONDS)
        )
    except RPCError as e:
        if e.status in (RPCStatusCode.CANCELLED, RPCStatusCode.DEADLINE_EXCEEDED):
            return None
        raise
    return found


async def until_settled(
    handle: WorkflowHandle[DBInstanceWorkflow, str], after: int, seconds: float
) -> Progress:
    """The progress once a pass after the ``after``-th has settled the instance."""
    deadline = time.monotonic() + seconds
    while True:
        now = await progress(handle)
        if now is not None and now.passes > after and SETTLED in now.waiting_for:
            return now
        seen = "no answer" if now is None else repr(now.waiting_for)
        assert time.monotonic() < deadline, f"not settled again: {seen}"
        await asyncio.sleep(0.5)


def apply_instance(kubectl: Kubectl, namespace: str) -> None:
    """Apply the DBInstance ``db``, checked every 10 s."""
    manifest = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {**SPEC, "healthCheckInterval": "10s"},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))


async def start_workflow(
    client: Client, namespace: str, queue: str
) -> WorkflowHandle[DBInstanceWorkflow, str]:
    """Start ``db``'s workflow on ``queue`` (no watcher runs: nothing else wakes it)."""
    return await client.start_workflow(
        DBInstanceWorkflow.run,
        WorkflowInput(namespace=namespace, name="db"),
        id=names.workflow_id(namespace, "db"),
        task_queue=queue,
    )


@pytest.mark.usefixtures("images")
async def test_a_worker_that_starts_looks_at_a_settled_instance_at_once(
    local_stack: StackInfo,
    namespace: str,
    kubectl: Kubectl,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    queue = f"start-{uuid.uuid4().hex[:8]}"
    apply_instance(kubectl, namespace)
    port = tools.free_port()
    first = await asyncio.to_thread(
        worker,
        local_stack,
        queue,
        tmp_path / "first.log",
        DBI_WATCH_NAMESPACES=namespace,
        DBI_METRICS_PORT=str(port),
    )
    try:
        handle = await start_workflow(temporal_client, namespace, queue)
        # Ready, then its first health check's pass settles it: hours to its own pass.
        settled = await until_settled(handle, 0, 240)
        # Its liveness counts on the re-checks that now stand in for those hours.
        assert probe(port, "/livez") == (200, "ok loop\nok rechecks\n")
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    # Alone on its queue, it handed nothing on: the passes would wait for the next worker.
    assert "no other worker polls" in (tmp_path / "first.log").read_text()
    second = await asyncio.to_thread(
        worker, local_stack, queue, tmp_path / "second.log", DBI_WATCH_NAMESPACES=namespace
    )
    try:
        # Nothing else wakes it here (no watcher runs): only the start round's wake.
        await until_settled(handle, settled.passes, PASS_SECONDS)
        assert "asking 1 instances for a pass" in (tmp_path / "second.log").read_text()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
