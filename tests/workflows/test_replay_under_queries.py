"""A workflow that answered queries while its passes ran replays as it ran.

The SDK (temporalio 1.35) can complete a workflow task with a local activity's marker
before the workflow code saw the activity's result: when a query rides on the task
(``dbi describe``, the UI's stack trace) and the activity ends as the task is
completed. The code then goes on in the next task; a replay, which resolves the
activity from its marker, goes on in the first. What the code asks of its task there
differs between the two: ``workflow.patched`` (a marker in the next task reads as
absent) and the history's length. A workflow that asked either at such a point failed
every task of any worker that did not hold it in its cache (a restart, another worker,
an eviction), and its instance stalled (test_hand_off recorded such a run in CI). A
run now asks no patch (a change to workflow code that needs one asks it at the run's
start: docs/engine.md) and reads the length only where a replay reads the same
(``DBInstanceWorkflow._read_history``).

Here, against the real dev server, a workflow with the stub steps is queried as fast as
it answers, over runs short enough to continue as new every few passes (each run begins
with a read of the history's length and ends on it); then every run's history
is replayed. Its passes come three ways: a wake every 20 ms (a pass runs with its load
when it finds the instance as the last pass did: one local activity), a wake every
20 ms of a new generation that shows the instance (``Wake.seen``: the pass runs with its
load, one local activity, from a run's first pass on), or a health check every 0.1 s
that nothing woke (an idle pass: one local activity, after which the run decides on
continuing as new).
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
                return  # a workflow whose tasks fail takes a bounded number of signals
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
            for _ in range(240):  # a workflow whose tasks fail makes no more runs
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
