"""Where workflow code runs: outside the SDK's sandbox in the worker, for its cost
(``workflows.worker.workflow_runner``); inside it in the workflow tests and the replay
of recorded histories, which is where a non-deterministic call is caught."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from tests.workflows.clock import ReadsTheClock
from workflows.worker import workflow_runner


@asynccontextmanager
async def _worker(env: WorkflowEnvironment, *, sandboxed: bool) -> AsyncIterator[str]:
    """A worker for ReadsTheClock with the runner ``workflow_runner`` gives; its queue."""
    queue = f"runner-{uuid.uuid4()}"
    runner = workflow_runner(sandboxed=sandboxed)
    async with Worker(
        env.client, task_queue=queue, workflows=[ReadsTheClock], workflow_runner=runner
    ):
        yield queue


async def _failed_task(handle: WorkflowHandle[ReadsTheClock, str]) -> str:
    """The message of the workflow's first failed workflow task, once there is one."""
    for _ in range(100):
        async for event in handle.fetch_history_events():
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
                return event.workflow_task_failed_event_attributes.failure.message
        await asyncio.sleep(0.1)
    raise AssertionError("no workflow task failed")


async def test_the_tests_sandbox_stops_workflow_code_reading_the_clock(
    time_env: WorkflowEnvironment,
) -> None:
    async with _worker(time_env, sandboxed=True) as queue:
        handle = await time_env.client.start_workflow(
            ReadsTheClock.run, id=f"clock-{uuid.uuid4()}", task_queue=queue
        )
        message = await _failed_task(handle)
        await handle.terminate()
    assert "datetime.datetime.now" in message


async def test_the_worker_runs_workflow_code_unchecked(time_env: WorkflowEnvironment) -> None:
    """The production runner: the same workflow completes (what the sandbox costs is in
    docs/benchmarks.md; the tests above and the replay keep the check)."""
    async with _worker(time_env, sandboxed=False) as queue:
        result = await time_env.client.execute_workflow(
            ReadsTheClock.run, id=f"clock-{uuid.uuid4()}", task_queue=queue
        )
    assert result[:4].isdigit()
