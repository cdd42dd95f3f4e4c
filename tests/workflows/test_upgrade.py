"""DBUpgradeWorkflow in the time-skipping environment, with stub activities: the order of
the upgrade's steps, the rollback before the point of no return, and a lost attempt."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio import activity
from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from dbi.upgrades import FINISH_FAILED, Plan, Ran, UpgradeRequest, UpgradeResult
from tests.workflows.conftest import _record
from workflows.upgrade import DBUpgradeWorkflow
from workflows.worker import Tuning, build_worker

REQUEST = UpgradeRequest(namespace="team-a", name="orders", uid="u1", from_major=16, to_major=17)
PLAN = Plan(new_root="orders-root-17aaaa", old_root="orders-root-16bbbb", new_image="i/p-17")
UPGRADED = Ran(ok=True, phase="upgraded", version="17.11")


@dataclass
class Script:
    """What the stub activities answer, and what they were called with."""

    plan: Plan = PLAN
    run: Callable[[int], Ran] = lambda attempt: UPGRADED
    verify: Ran | Exception = field(
        default_factory=lambda: Ran(ok=True, phase="verified", version="17.11")
    )
    finishes: bool = True
    calls: list[str] = field(default_factory=list)

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name=pipeline.BEGIN_UPGRADE)
        async def begin(request: UpgradeRequest) -> Plan:
            self.calls.append("begin")
            return self.plan

        @activity.defn(name=pipeline.RUN_UPGRADE)
        async def run(request: UpgradeRequest, plan: Plan) -> Ran:
            self.calls.append("run")
            return self.run(activity.info().attempt)

        @activity.defn(name=pipeline.VERIFY_UPGRADE)
        async def verify(request: UpgradeRequest, plan: Plan) -> Ran:
            self.calls.append("verify")
            if isinstance(self.verify, Exception):
                raise self.verify
            return self.verify

        @activity.defn(name=pipeline.ROLLBACK_UPGRADE)
        async def rollback(request: UpgradeRequest, plan: Plan) -> Ran:
            self.calls.append("rollback")
            return Ran(ok=False, phase="rolled-back", version="16.15")

        @activity.defn(name=pipeline.FINISH_UPGRADE)
        async def finish(request: UpgradeRequest, plan: Plan) -> str:
            self.calls.append("finish")
            if not self.finishes:
                raise RuntimeError("the VM has no address")
            return "17.11"

        return [begin, run, verify, rollback, finish]


async def upgrade(env: WorkflowEnvironment, script: Script) -> UpgradeResult:
    queue = f"upgrade-{uuid.uuid4()}"
    # The production worker's split: the long activities on their own task queue.
    async with build_worker(
        env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        handle = await env.client.start_workflow(
            DBUpgradeWorkflow.run,
            REQUEST,
            id=f"dbupgrade/team-a/orders-u1-to-17-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        result = await handle.result()
        if os.environ.get("DBI_RECORD_HISTORIES"):
            await _record(env, handle)
    return result


async def test_an_upgrade_begins_runs_verifies_then_finishes(
    time_env: WorkflowEnvironment,
) -> None:
    script = Script()
    result = await upgrade(time_env, script)
    assert script.calls == ["begin", "run", "verify", "finish"]
    assert result.ok and result.reason == "Upgraded" and "17.11" in result.message


@pytest.mark.parametrize(
    ("phase", "verified", "reason", "calls"),
    [
        pytest.param("check", True, "UpgradeCheckFailed", ["begin", "run", "rollback"], id="check"),
        pytest.param("copy", True, "UpgradeFailed", ["begin", "run", "rollback"], id="copy"),
        pytest.param(
            "upgraded",
            False,
            "UpgradeVerifyFailed",
            ["begin", "run", "verify", "rollback"],
            id="verify",
        ),
        pytest.param(
            "boot", True, "UpgradeBootFailed", ["begin", "run", "rollback"], id="never-boots"
        ),
    ],
)
async def test_a_failure_before_the_point_of_no_return_rolls_back(
    time_env: WorkflowEnvironment, phase: str, verified: bool, reason: str, calls: list[str]
) -> None:
    """The old data is removed (finish) only after the new server was verified; any
    failure before rolls back, and the result says where it failed."""
    failed = phase != "upgraded"
    script = Script(
        run=lambda attempt: Ran(ok=not failed, phase=phase, output="pg_upgrade: no"),
        verify=Ran(ok=verified, phase="verify", output="PostgreSQL 16.15 answers, not 17."),
    )
    result = await upgrade(time_env, script)
    assert script.calls == calls
    assert not result.ok and result.reason == reason
    assert "finish" not in script.calls


async def test_a_run_lost_with_its_worker_is_tried_again(time_env: WorkflowEnvironment) -> None:
    """An attempt that fails (its worker gone, an API error) is retried, not rolled back."""

    def flaky(attempt: int) -> Ran:
        if attempt < 3:
            raise RuntimeError("the worker went away")
        return UPGRADED

    script = Script(run=flaky)
    result = await upgrade(time_env, script)
    assert result.ok
    assert script.calls == ["begin", "run", "run", "run", "verify", "finish"]


async def test_an_upgrade_that_cannot_begin_changes_nothing(time_env: WorkflowEnvironment) -> None:
    script = Script(plan=Plan(reason="NotRunning", message="The instance is stopped."))
    result = await upgrade(time_env, script)
    assert script.calls == ["begin"]
    assert not result.ok and result.reason == "NotRunning"


async def test_a_finish_that_fails_is_not_rolled_back(time_env: WorkflowEnvironment) -> None:
    """Past verification the new data is the data: a finish that keeps failing ends the
    upgrade UpgradeFinishFailed (a new attempt finishes it), never with a rollback."""
    script = Script(finishes=False)
    result = await upgrade(time_env, script)
    assert "rollback" not in script.calls
    assert script.calls.count("finish") > 1
    assert not result.ok and result.reason == FINISH_FAILED
    assert "old data is still there" in result.message


async def test_a_run_that_keeps_failing_is_rolled_back_not_retried_for_ever(
    time_env: WorkflowEnvironment,
) -> None:
    """A run whose every attempt fails (an image that never boots far enough to say
    so) is given up after three attempts, and the old data boots again."""

    def failing(attempt: int) -> Ran:
        raise RuntimeError(f"no report yet (attempt {attempt})")

    script = Script(run=failing)
    result = await upgrade(time_env, script)
    assert script.calls == ["begin", "run", "run", "run", "rollback"]
    assert not result.ok and result.reason == "UpgradeBootFailed"


async def test_a_verify_that_keeps_failing_is_rolled_back_and_the_workflow_ends(
    time_env: WorkflowEnvironment,
) -> None:
    """A verify that keeps raising (ANALYZE cut off, the server gone) rolls back before
    the point of no return; the workflow completes with the reason, it does not fail
    (a failed workflow leaves the step nothing to say)."""
    script = Script(verify=RuntimeError("the session was cut"))
    result = await upgrade(time_env, script)
    assert script.calls[-1] == "rollback" and "finish" not in script.calls
    assert not result.ok and result.reason == "UpgradeVerifyFailed"
