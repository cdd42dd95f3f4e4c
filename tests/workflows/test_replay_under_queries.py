"""A workflow that answered queries while its passes ran replays as it ran.

When a query rides on a workflow task (``dbi describe``, the UI's stack trace) while a
local activity runs, the worker (temporalio 1.35) completes the task without the
activity's marker and asks for a new one; the code sees the result in that new task,
after the new task's signals. A replay applies the two tasks as one. What the code
reads of its task in the first differs between the two: ``workflow.patched`` asked
there (its marker is in the next task), the history's length and the server's
suggestion (a replay reads the second task's), and anything a signal changed. A
workflow that decided on any of them failed every task of any worker that did not hold
it in its cache (a restart, another worker, an eviction, a query of a run not cached),
and its instance stalled. A run asks every patch at its start, and continues as new on
a count of its passes and their activities (``workflows.state.Tally``).

Here, against the real dev server, a workflow with the stub steps is queried as fast as
it answers, over runs short enough to continue as new every few passes; then every
run's history is replayed. Its passes come three ways: a wake every 20 ms (a pass runs
with its load when it finds the instance as the last pass did: one local activity), a
wake every 20 ms of a new generation that shows the instance (``Wake.seen``: the pass
runs with its load, one local activity, from a run's first pass on), or a health check
every 0.1 s that nothing woke (an idle pass: one local activity, after which the run
decides on continuing as new).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from dbi import names, pipeline
from dbi.messages import Progress, SeenInstance, Wake, WorkflowInput
from tests import history as histories
from tests.workflows import definitions
from tests.workflows.stubs import World, activities
from workflows.dbinstance import DBInstanceWorkflow
from workflows.worker import Tuning, build_worker

pytestmark = pytest.mark.stack

# Runs of the least history the input allows: a new run (its patch decisions) every few
# passes, and a continue-as-new decision after every pass.
SHORT_RUNS = 50
RUNS = 20
QUERIERS = 3


async def _clock() -> datetime:
    return datetime.now(UTC)


async def _hammer(
    handle: WorkflowHandle[DBInstanceWorkflow, str],
    stop: asyncio.Event,
    *,
    woken: bool,
    shown: World | None = None,
) -> None:
    """Queries back to back (many a pass's tasks carry one), and when ``woken`` a wake
    every 20 ms; with ``shown``, each of a new generation of that world's instance, which
    the wake carries."""

    async def query() -> None:
        while not stop.is_set():
            try:
                await handle.query(
                    names.PROGRESS, result_type=Progress, rpc_timeout=timedelta(seconds=5)
                )
            except RPCError:
                await asyncio.sleep(0.05)  # no answer within the timeout

    async def wake() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            signal = Wake(reason=f"test wake {n}")
            if shown is not None:
                shown.generation += 1
                seen = SeenInstance.of(shown.snapshot())
                signal = Wake(reason=signal.reason, generation=shown.generation, seen=seen)
            try:
                await handle.signal(names.WAKE, signal)
            except RPCError:
                # "workflow is closing": a continue-as-new is under way. When the server
                # refused one that raced a signal, the SDK may lose the next task, which
                # the server gives again after TASK_TIMEOUT; the wakes go on after it.
                await asyncio.sleep(0.5)
                continue
            await asyncio.sleep(0.02)

    wakes = [wake()] if woken else []
    await asyncio.gather(*wakes, *(query() for _ in range(QUERIERS)))


@pytest.mark.parametrize("passes", ["woken", "shown", "idle"])
async def test_a_workflow_queried_while_its_passes_run_replays(
    temporal_client: Client, passes: str
) -> None:
    world = World(clock=_clock, interval_seconds=0.1 if passes == "idle" else 300.0)
    queue = f"replay-{uuid.uuid4().hex[:8]}"
    workflow_id = f"dbinstance/team-a/db-{uuid.uuid4().hex[:8]}"
    async with build_worker(temporal_client, activities(world), task_queue=queue, tuning=Tuning()):
        await temporal_client.start_workflow(
            DBInstanceWorkflow.run,
            WorkflowInput(namespace="team-a", name="db", history_limit=SHORT_RUNS),
            id=workflow_id,
            task_queue=queue,
        )
        stop = asyncio.Event()
        latest: WorkflowHandle[DBInstanceWorkflow, str] = temporal_client.get_workflow_handle(
            workflow_id
        )
        # A query that fails (one that replays a run) ends the test with its error.
        shown = world if passes == "shown" else None
        hammering = asyncio.create_task(_hammer(latest, stop, woken=passes != "idle", shown=shown))
        try:
            for _ in range(480):  # a workflow whose tasks fail makes no more runs
                made = len(await histories.runs(temporal_client, workflow_id))
                if made > RUNS or hammering.done():
                    break
                await asyncio.sleep(0.5)
        finally:
            stop.set()
            await latest.terminate("test over")
            await hammering
    runs = await histories.runs(temporal_client, workflow_id)
    replayer = definitions.replayer(sandboxed=False)  # as the worker runs workflows
    failed = []
    for i, history in enumerate(reversed(runs), 1):
        result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
        if result.replay_failure is not None:
            failed.append(f"run {i}: {result.replay_failure}"[:300])
    assert not failed, f"{len(failed)} of {len(runs)} runs do not replay: {failed}"
    assert len(runs) > RUNS, f"the workflow continued as new {len(runs) - 1} times"
    if shown is not None:  # the wakes' passes ran with their loads
        kinds = [kind for run in runs for kind in histories.local_activities(run)]
        assert kinds.count(pipeline.LOAD_AND_RUN_PASS) > len(runs)
