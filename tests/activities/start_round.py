"""A workflow started as the watcher starts it, and its wait for the worker's
re-checks."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import timedelta

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from dbi.messages import Progress, WorkflowInput
from tests.activities.crashing import SPEC
from tests.stack import Kubectl
from workflows.dbinstance import DBInstanceWorkflow

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
