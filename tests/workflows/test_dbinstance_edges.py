"""DBInstanceWorkflow at its edges: updates it cannot serve, deletion in every wait.

A user's command never fails an instance's workflow, and no workflow outlives its
instance. Stub steps in the time-skipping environment.
"""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from dbi.messages import RotationResult, Wake
from dbi.models import Served
from dbi.spec import PowerState
from dbi.steps import Outcome
from tests.workflows.conftest import running, settled, until
from tests.workflows.stubs import Scripted, World


@pytest.mark.parametrize(
    ("update", "says"),
    [
        pytest.param("rotate_credentials", "start it to rotate", id="rotate"),
        pytest.param("force_resize", "takes its new size when it starts", id="force-resize"),
    ],
)
async def test_updates_on_a_stopped_instance_are_refused_and_the_workflow_runs_on(
    time_env: WorkflowEnvironment, update: str, says: str
) -> None:
    """A Stopped instance refuses rotate_credentials and force_resize with a reason; the
    workflow keeps running and no rotation is attempted."""
    world = World(power_state=PowerState.STOPPED)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        with pytest.raises(WorkflowUpdateFailedError) as raised:
            await handle.execute_update(update)
        assert "is stopped" in str(raised.value.cause)
        assert says in str(raised.value.cause)
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    assert [step for step, _ in world.calls].count("rotate_credentials") == 0


@pytest.mark.parametrize(
    ("error", "says"),
    [
        pytest.param(
            ApplicationError(
                "the instance is not running; start it to rotate",
                type="NotRunning",
                non_retryable=True,
            ),
            "the instance is not running; start it to rotate",
            id="refused-by-the-activity",
        ),
        pytest.param(
            RuntimeError("connection to 127.10.0.2 refused (stub)"),
            "the rotation failed after 3 attempts",
            id="database-unreachable",
        ),
    ],
)
async def test_a_failing_rotation_answers_its_caller_and_the_passes_go_on(
    time_env: WorkflowEnvironment, error: Exception, says: str
) -> None:
    """A rotation that fails is answered with a failure after bounded attempts (the
    error's detail stays in history); the workflow keeps running and its next pass runs."""
    world = World(rotation_error=error)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        with pytest.raises(WorkflowUpdateFailedError) as raised:
            await handle.execute_update("rotate_credentials", result_type=RotationResult)
        cause = str(raised.value.cause)
        assert says in cause
        assert "stub" not in cause
        tries = [step for step, _ in world.calls].count("rotate_credentials")
        assert tries == (1 if isinstance(error, ApplicationError) else 3)
        await until(lambda: len(world.reports) >= 2)  # the pass after the request ran
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_a_stalled_instance_deleted_ends_its_workflow(time_env: WorkflowEnvironment) -> None:
    """Terminal waits for a new generation or a retry; the deletion's wake ends that wait
    too, and the workflow completes."""
    world = World()
    world.always["preflight"] = Scripted(Outcome.TERMINAL, "ImageNotFound")
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        world.exists = False
        await handle.signal("wake", Wake(reason="DBInstance db deleted", gone=True))
        assert await asyncio.wait_for(handle.result(), 10) == "the instance no longer exists"


async def test_a_deletion_with_a_queued_update_refuses_it_and_completes(
    time_env: WorkflowEnvironment,
) -> None:
    """A forced resize waiting for its pass when the instance is deleted is answered
    "being deleted"; the teardown runs and the workflow completes."""
    world = World()
    world.always["teardown_vm"] = Scripted(Outcome.PENDING, "Deleting", 5)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        # The restart never ends, however much time the test server skips meanwhile.
        world.always["resize"] = Scripted(Outcome.PENDING, "Restarting", 3600)
        resize = asyncio.create_task(handle.execute_update("force_resize"))
        await until(lambda: len(world.reports) >= 2)
        world.deleting = True
        await handle.signal("wake", Wake(reason="DBInstance db modified", generation=2))
        with pytest.raises(WorkflowUpdateFailedError) as raised:
            await resize
        assert "being deleted" in str(raised.value.cause)
        del world.always["teardown_vm"]
        await time_env.sleep(6)
        assert await asyncio.wait_for(handle.result(), 20) == "deleted"


async def test_a_rotation_around_continue_as_new_is_answered(
    time_env: WorkflowEnvironment,
) -> None:
    """Under a low history limit, rotations keep being served across continue-as-new:
    every request is answered, each rotates once."""
    world = World()
    world.always["vm"] = Scripted(Outcome.PENDING, "VMCreated", 3600)
    async with running(time_env, world, history_limit=50) as handle:
        first_run = (await handle.describe()).run_id
        await settled(handle, 1)
        results = [
            await handle.execute_update("rotate_credentials", result_type=RotationResult)
            for _ in range(6)
        ]
        latest = await time_env.client.get_workflow_handle(handle.id).describe()
    assert latest.run_id != first_run
    assert all(r.rotated for r in results)
    assert len(world.rotated_ids) == 6


async def test_an_admin_rotation_is_served_like_an_app_rotation(
    time_env: WorkflowEnvironment,
) -> None:
    """rotate_admin_credentials is served between passes by its own activity, and the
    app's rotation by its own, each answered."""
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        admin = await handle.execute_update("rotate_admin_credentials", result_type=RotationResult)
        app = await handle.execute_update("rotate_credentials", result_type=RotationResult)
    assert admin.rotated and admin.secret_name.startswith("dbi-system/")
    assert app.rotated and app.secret_name.endswith("-credentials")
    served = [s for s, _ in world.calls if s.startswith("rotate_")]
    assert served == ["rotate_admin_credentials", "rotate_credentials"]


async def test_a_rotation_annotated_on_a_new_instance_waits_until_it_is_ready(
    time_env: WorkflowEnvironment,
) -> None:
    """An instance applied with dbi.dev/rotate-requested-at already set: the rotation is
    carried out once, as soon as a pass found the instance Ready, never tried (and
    failed, with a traceback in the worker's log) while it was still being built."""
    world = World(requested=Served(rotate_requested_at="t1"), rotation_needs_ready=True)
    world.then("vm", Scripted(Outcome.PENDING, "VMCreated", requeue_after=5))
    async with running(time_env, world) as handle:
        await until(lambda: world.served.rotate_requested_at == "t1")
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    assert [step for step, _ in world.calls].count("rotate_credentials") == 1
    ready_at = next(i for i, r in enumerate(world.reports) if r.report.converged)
    served_at = next(i for i, r in enumerate(world.reports) if r.report.served)
    assert served_at == ready_at + 1  # the pass right after the first Ready one


async def test_a_deletion_while_a_rotation_is_served_is_not_lost(
    time_env: WorkflowEnvironment,
) -> None:
    """A Ready instance serves its rotate annotation between its pass's load and steps;
    the instance deleted meanwhile (its wake arriving then) is torn down at once, not
    after healthCheckInterval: the pass that loaded before the deletion does not
    swallow the wake."""
    world = World(rotation_seconds=2.0)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        world.requested = Served(rotate_requested_at="t1")
        await handle.signal("wake", Wake(reason="DBInstance db annotated", retry=True))
        await until(lambda: "rotate_credentials" in [step for step, _ in world.calls])
        world.deleting = True  # the load already ran: it saw the instance alive
        await handle.signal("wake", Wake(reason="DBInstance db modified", generation=2))
        # Not skipping time: the teardown must come from the wake, not the interval.
        await until(lambda: "teardown_finalizer" in [step for step, _ in world.calls])
        assert await asyncio.wait_for(handle.result(), 10) == "deleted"
