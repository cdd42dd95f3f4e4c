"""The time-skipping test environment and a harness that runs one instance's workflow."""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

import pytest_asyncio
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest
from temporalio.client import WorkflowHandle
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.testing import WorkflowEnvironment

from dbi import names
from dbi.messages import Progress, Wake, WorkflowInput
from dbi.payloads import DATA_CONVERTER
from devstack import tools
from tests.workflows.recorded import history_path
from tests.workflows.stubs import World, activities
from workflows.dbinstance import DBInstanceWorkflow
from workflows.worker import Tuning, build_worker

SANDBOXED = Tuning(sandboxed=True)
STARTUP = timedelta(seconds=60)


async def start_time_skipping() -> WorkflowEnvironment:
    """Start Temporal's time-skipping test server (from its wheel) with dbi's search
    attributes, and a client to it with the worker's data converter and tracing."""
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=DATA_CONVERTER,
        interceptors=[TracingInterceptor()],
        test_server_existing_path=str(tools.venv_tool("temporal-test-server")),
        # The SDK's default of 5 s is too short on a loaded 2-core CI machine: one
        # start in ~860 failed there ("did not start within 5s").
        test_server_startup_timeout=STARTUP,
    )
    await env.client.operator_service.add_search_attributes(
        AddSearchAttributesRequest(
            namespace=env.client.namespace,
            search_attributes={
                key: IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.upper()}")
                for key, kind in names.SEARCH_ATTRIBUTES.items()
            },
        )
    )
    return env


@pytest_asyncio.fixture
async def time_env() -> AsyncIterator[WorkflowEnvironment]:
    """The time-skipping test server for one test.

    One server per test: a test that ends while a workflow is mid-task can leave the
    shared server's time-skipping lock held, and the next test's skips then hang.
    """
    env = await start_time_skipping()
    yield env
    await env.shutdown()


Run = Callable[..., Any]


@asynccontextmanager
async def running(
    env: WorkflowEnvironment,
    world: World,
    *,
    history_limit: int = 10_000,
    wake: Wake | None = None,
) -> AsyncIterator[WorkflowHandle[DBInstanceWorkflow, str]]:
    """Run a worker with stubs playing ``world``, and a workflow for one instance;
    started with ``wake``, as the watcher's signal-with-start does, when given."""
    world.clock = env.get_current_time
    queue = f"wf-{uuid.uuid4()}"
    name = f"db-{uuid.uuid4().hex[:8]}"
    # In the SDK's sandbox, unlike the production worker: a workflow test fails where
    # workflow code reads the clock or draws a random number (``workflow_runner``).
    async with build_worker(env.client, activities(world), task_queue=queue, tuning=SANDBOXED):
        handle = await env.client.start_workflow(
            DBInstanceWorkflow.run,
            WorkflowInput(namespace="team-a", name=name, history_limit=history_limit),
            id=f"dbinstance/team-a/{name}",
            task_queue=queue,
            start_signal=names.WAKE if wake else None,
            start_signal_args=[wake] if wake else [],
        )
        yield handle
        if os.environ.get("DBI_RECORD_HISTORIES"):
            await _record(env, handle)
        if (await handle.describe()).close_time is None:
            await handle.terminate("test over")


async def _record(env: WorkflowEnvironment, handle: WorkflowHandle[Any, Any]) -> None:
    """Keep this test's history for the replay test (DBI_RECORD_HISTORIES=1 ./dev test),
    in a new file: a re-recording adds histories, it never replaces one."""
    test = os.environ["PYTEST_CURRENT_TEST"].split("::")[-1].split(" ")[0]
    slug = re.sub(r"[^a-z0-9]+", "-", test.lower()).strip("-")
    # The first run: a run that continued as new holds the hand-over (a handle without a
    # run id would give the newest run, which may have just begun).
    first = env.client.get_workflow_handle(handle.id, run_id=handle.first_execution_run_id)
    history = await first.fetch_history()
    history_path(slug).write_text(history.to_json())


async def until(check: Callable[[], bool], *, timeout: float = 20.0) -> None:
    """Wait, in real time, until the worker has done what ``check`` looks for."""
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the expected workflow progress did not happen")


async def settled(handle: WorkflowHandle[Any, Any], passes: int) -> Progress:
    """Wait until the workflow has finished pass number ``passes`` and started waiting.

    Time skipped before the workflow set its timer would not count toward it.
    """
    for _ in range(1000):
        progress: Progress = await handle.query("progress", result_type=Progress)
        if progress.passes == passes and progress.waiting_for != "a pass is running":
            return progress
        if progress.passes > passes:
            raise AssertionError(f"expected {passes} passes, saw {progress.passes}")
        await asyncio.sleep(0.02)
    raise AssertionError(f"pass {passes} did not finish")
