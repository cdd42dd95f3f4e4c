"""DBRestoreTestWorkflow in the time-skipping environment, with stub activities: a
throwaway that never goes Ready fails the test at its timeout, looked at less and less
often; a cancelled test still deletes its throwaway and says so; a test nobody asks
for writes nothing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from dbi import names, pipeline
from dbi.restoretest import Reason, RestoreTestBegun, RestoreTestEnd, RestoreTestRequest, Verdict
from workflows.worker import Tuning, build_worker

REQUEST = RestoreTestRequest(namespace="team-a", name="orders")
TWO_HOURS = 7200.0
BEGUN = RestoreTestBegun(instance="orders-restore-test", uid="u1", timeout_seconds=TWO_HOURS)


PENDING = RestoreTestBegun(uid="u1", reason=Reason.WAL_PENDING, message="not stored yet")


@dataclass
class Script:
    begun: RestoreTestBegun = field(default_factory=lambda: BEGUN)
    pending: int = 0  # how many begins say the backup's WAL is not stored yet
    begins: int = 0
    checks: int = 0
    ended: list[RestoreTestEnd] = field(default_factory=list)

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name=pipeline.BEGIN_RESTORE_TEST)
        async def begin(request: RestoreTestRequest) -> RestoreTestBegun:
            self.begins += 1
            return PENDING if self.begins <= self.pending else self.begun

        @activity.defn(name=pipeline.CHECK_RESTORE_TEST)
        async def check(namespace: str, name: str) -> Verdict:
            self.checks += 1
            return Verdict(over=False, message="Provisioning: vm: booting")

        @activity.defn(name=pipeline.END_RESTORE_TEST)
        async def end(end: RestoreTestEnd) -> None:
            self.ended.append(end)

        return [begin, check, end]


async def started(env: WorkflowEnvironment, script: Script, queue: str) -> Any:
    return await env.client.start_workflow(
        names.RESTORE_TEST_WORKFLOW_TYPE,
        REQUEST,
        id=f"dbrestoretest/team-a/orders-{uuid.uuid4()}",
        task_queue=queue,
        result_type=RestoreTestEnd,
    )


async def test_a_throwaway_never_ready_fails_the_test_at_its_timeout(
    time_env: WorkflowEnvironment,
) -> None:
    script, queue = Script(), f"restoretest-{uuid.uuid4()}"
    async with build_worker(
        time_env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        result = await (await started(time_env, script, queue)).result()
    assert (result.succeeded, result.reason) == (False, Reason.TIMED_OUT)
    assert "orders-restore-test was not Ready within 2:00:00" in result.message
    assert result.message.endswith("last: Provisioning: vm: booting")
    assert script.ended == [result]  # deleted, and written, once
    assert result.finished_at - result.started_at >= timedelta(seconds=TWO_HOURS)
    # Every 15 s would be 480 looks; a tenth of the time so far, at most 5 min, is fewer.
    assert 30 < script.checks < 100, script.checks


async def test_a_cancelled_test_still_deletes_its_throwaway_and_says_so(
    time_env: WorkflowEnvironment,
) -> None:
    script, queue = Script(), f"restoretest-{uuid.uuid4()}"
    async with build_worker(
        time_env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        handle = await started(time_env, script, queue)
        while script.checks < 2:
            await asyncio.sleep(0.1)
        await handle.cancel()
        try:
            await handle.result()
        except WorkflowFailureError:
            pass
        else:
            raise AssertionError("a cancelled test completed")
    (end,) = script.ended
    assert (end.succeeded, end.instance, end.reason) == (False, BEGUN.instance, Reason.FAILED)
    assert "cancelled" in end.message


async def test_a_test_nobody_asks_for_writes_nothing(time_env: WorkflowEnvironment) -> None:
    script = Script(begun=RestoreTestBegun(reason=Reason.NOT_ASKED))
    queue = f"restoretest-{uuid.uuid4()}"
    async with build_worker(
        time_env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        assert await (await started(time_env, script, queue)).result() is None
    assert script.ended == [] and script.checks == 0


async def test_a_test_waits_for_the_archiver_then_gives_up_saying_why(
    time_env: WorkflowEnvironment,
) -> None:
    """Right after a backup the WAL it begins in may not be stored yet: the test looks
    again (durable timers) and goes on once it is; one that never is fails with that
    reason, and nothing was made."""
    script, queue = Script(pending=3), f"restoretest-{uuid.uuid4()}"
    async with build_worker(
        time_env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        result = await (await started(time_env, script, queue)).result()
        assert script.begins == 4 and result.reason == Reason.TIMED_OUT  # then it went on

        never = Script(pending=1000)
        never_queue = f"restoretest-{uuid.uuid4()}"
        async with build_worker(
            time_env.client,
            never.activities(),
            task_queue=never_queue,
            tuning=Tuning(sandboxed=True),
        ):
            gave_up = await (await started(time_env, never, never_queue)).result()
    assert (gave_up.succeeded, gave_up.reason, gave_up.instance) == (
        False,
        Reason.WAL_PENDING,
        None,
    )
    assert gave_up.message == "not stored yet" and never.checks == 0
    assert 25 <= never.begins <= 35  # every 30 s for 15 min
