"""A worker that stops hands the instances it settled on to the workers still polling.

A settled instance's workflow waits RECHECK_NET (6 h) for its own pass while the worker
that settled it re-checks it (activities.worker.rechecks). A worker that stops, in a rolling
update or a scale-down, asks each of those workflows for a pass now (``Wake.settle``):
another worker runs it and settles the instance there, so its looks go on within
about a minute instead of hours.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle

from devstack.stack import StackInfo
from tests.activities.crashing import worker
from tests.activities.start_round import (
    PASS_SECONDS,
    apply_instance,
    start_workflow,
    until_settled,
)
from tests.stack import Kubectl
from workflows.dbinstance import DBInstanceWorkflow

pytestmark = pytest.mark.stack


async def last_task_by(handle: WorkflowHandle[DBInstanceWorkflow, str]) -> str:
    """The identity (pid@host) of the worker that completed the workflow's last task:
    the one whose local activity ran, and settled, its last pass."""
    identity = ""
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_completed_event_attributes"):
            identity = event.workflow_task_completed_event_attributes.identity
    return identity


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        process.wait(90)


@pytest.mark.usefixtures("images")
async def test_a_stopping_worker_hands_its_settled_instance_to_the_other(
    local_stack: StackInfo,
    namespace: str,
    kubectl: Kubectl,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    queue = f"hand-{uuid.uuid4().hex[:8]}"
    apply_instance(kubectl, namespace)
    logs = {"first": tmp_path / "first.log", "second": tmp_path / "second.log"}
    env = {"DBI_WATCH_NAMESPACES": namespace}
    workers = {"first": await asyncio.to_thread(worker, local_stack, queue, logs["first"], **env)}
    try:
        handle = await start_workflow(temporal_client, namespace, queue)
        settled = await until_settled(handle, 0, 240)
        workers["second"] = await asyncio.to_thread(
            worker, local_stack, queue, logs["second"], **env
        )
        # The second's start round asks the instance for a pass, which settles it again
        # on whichever worker ran it: the one stopped next.
        await until_settled(handle, settled.passes, PASS_SECONDS)
        holder = await last_task_by(handle)
        stopping = next(k for k, p in workers.items() if holder.startswith(f"{p.pid}@"))
        staying = "second" if stopping == "first" else "first"
        before = await until_settled(handle, 0, 30)
        await asyncio.to_thread(stop, workers[stopping])
        assert "handed 1 of 1 settled instances on" in logs[stopping].read_text()
        # Nothing else wakes it here (no watcher runs, the start rounds are over): only
        # the hand-off brings this pass, on the worker that stays, where it settles.
        await until_settled(handle, before.passes, PASS_SECONDS)
        assert (await last_task_by(handle)).startswith(f"{workers[staying].pid}@")
    finally:
        for process in workers.values():
            await asyncio.to_thread(stop, process)
