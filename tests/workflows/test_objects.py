"""DBDatabaseWorkflow (workflows.objects) in the time-skipping environment, with stub
activities: a pass runs the steps in order, a Pending step's timer brings the next
pass, and a teardown that converged ends the workflow."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from dbi import names, pipeline
from dbi.objects import DATABASES, Loaded, ObjectPass, ObjectRef
from dbi.steps import Outcome, StepResult
from tests.workflows.conftest import _record
from workflows.objects import DBDatabaseWorkflow
from workflows.worker import Tuning, build_worker

REF = ObjectRef(kind=names.DATABASE_KIND, namespace="team-a", name="reports", uid="u1")


@dataclass
class World:
    """What the stubs answer: the create step is Pending (a 30 s hint) ``pending`` times,
    and the object is being deleted from its ``deleted_from``-th load on."""

    pending: int = 2
    deleted_from: int = 5
    calls: list[str] = field(default_factory=list)
    written: list[ObjectPass] = field(default_factory=list)
    loads: int = 0

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name=pipeline.LOAD_OBJECT)
        async def load(ref: ObjectRef) -> Loaded:
            self.loads += 1
            return Loaded(
                exists=True, uid="u1", generation=1, deleting=self.loads >= self.deleted_from
            )

        @activity.defn(name=pipeline.WRITE_OBJECT_STATUS)
        async def write(done: ObjectPass) -> None:
            self.written.append(done)

        def step(spec: pipeline.StepSpec) -> Callable[..., Any]:
            @activity.defn(name=spec.name)
            async def run(ref: ObjectRef) -> StepResult:
                self.calls.append(spec.name)
                if spec is pipeline.DATABASE_CREATE and self.pending > 0:
                    self.pending -= 1
                    return spec.result(
                        Outcome.PENDING, "OwnerMissing", "m", requeue_after_seconds=30
                    )
                return spec.result(Outcome.SATISFIED, "Ok", "m")

            return run

        steps = [step(s) for s in (*DATABASES.steps, *DATABASES.teardown)]
        return [load, write, *steps]


async def test_a_pending_step_is_looked_at_again_and_a_teardown_ends_the_workflow(
    time_env: WorkflowEnvironment,
) -> None:
    world = World()
    queue = f"objects-{uuid.uuid4()}"
    async with build_worker(
        time_env.client, world.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        handle = await time_env.client.start_workflow(
            DBDatabaseWorkflow.run,
            REF,
            id=DATABASES.workflow_id("team-a", "reports"),
            task_queue=queue,
        )
        await handle.result()
        if os.environ.get("DBI_RECORD_HISTORIES"):
            await _record(time_env, handle)
    instance, create, extensions = (s.name for s in DATABASES.steps)
    assert world.calls == [
        instance,
        create,  # Pending: a 30 s timer
        instance,
        create,  # Pending again
        instance,
        create,
        extensions,  # Ready: re-checked after RECHECK
        instance,
        create,
        extensions,
        pipeline.DATABASE_RELEASE.name,  # deleting: the teardown converges, the run ends
    ]
    assert [w.deleting for w in world.written] == [False] * 4 + [True]
    assert all(w.workflow_id == "dbdatabase/team-a/reports" for w in world.written)
