"""DBRestoreTestWorkflow: one restore test of one DBInstance (``spec.backup.restoreTest``).

Started by the instance's restore-test Schedule (``names.restore_test_schedule_id``), or
by hand from it (``temporal schedule trigger``). It makes the throwaway instance
(``begin_restore_test``: the newest Completed backup and the WAL archived since; it
waits first while the WAL that backup begins in is not stored yet), then
looks at it (``check_restore_test``) on durable timers, often at first and less often
as the restore goes on, until it is Ready, Stalled, gone, or past
``restoreTest.timeout``; then deletes it and writes how the test went on the tested
instance (``end_restore_test``), also when the workflow is cancelled, and wakes the
instance's workflow, whose next status write shows the condition RestoreTestSucceeded.
Its result is what it wrote (None: no test was asked).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline
    from dbi.messages import Wake
    from dbi.restoretest import (
        Reason,
        RestoreTestBegun,
        RestoreTestEnd,
        RestoreTestRequest,
        Verdict,
    )

SHORT = timedelta(seconds=30)
# A leftover throwaway of an earlier run is deleted before a new one is made: begin
# is retried while it goes.
BEGIN_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=30), maximum_attempts=40)
SHORT_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)
# The throwaway is looked at every FIRST_LOOK at first, then every tenth of the time
# since the test began, at most every LAST_LOOK: a 48-hour restore is a few hundred
# looks in the history.
FIRST_LOOK = timedelta(seconds=15)
# The archiver stores WAL once a minute: a test right after a backup waits for it.
WAL_LOOK = timedelta(seconds=30)
WAL_WAIT = timedelta(minutes=15)
LAST_LOOK = timedelta(minutes=5)


@workflow.defn(name=names.RESTORE_TEST_WORKFLOW_TYPE)
class DBRestoreTestWorkflow:
    @workflow.run
    async def run(self, request: RestoreTestRequest) -> RestoreTestEnd | None:
        started = workflow.now()
        workflow.set_current_details(f"restore test of {request.namespace}/{request.name}")
        begun = await self._begin(request)
        if begun.reason == Reason.NOT_ASKED:
            return None
        end = RestoreTestEnd(
            namespace=request.namespace,
            name=request.name,
            uid=begun.uid,
            instance=begun.instance,
            started_at=started,
            finished_at=started,
            succeeded=False,
            reason=begun.reason or "",
            message=begun.message,
        )
        try:
            if begun.instance is not None:
                end = await self._watch(begun, begun.instance, end)
        except asyncio.CancelledError:
            cancelled = "The test was cancelled before the throwaway instance went Ready."
            end = end.model_copy(update={"reason": Reason.FAILED, "message": cancelled})
            await self._end(end)
            raise
        return await self._end(end)

    async def _begin(self, request: RestoreTestRequest) -> RestoreTestBegun:
        """Make the throwaway; while the newest backup's first WAL segment is not stored
        yet, look again every WAL_LOOK, for WAL_WAIT at most (then the test fails with
        that reason: the archiver's trouble, which DbiWalArchivingStuck names)."""
        waited = timedelta(0)
        while True:
            begun: RestoreTestBegun = await workflow.execute_activity(
                pipeline.BEGIN_RESTORE_TEST,
                request,
                result_type=RestoreTestBegun,
                start_to_close_timeout=SHORT,
                retry_policy=BEGIN_RETRY,
                summary="begin: the throwaway instance, restored from the newest backup",
            )
            if begun.reason != Reason.WAL_PENDING or waited >= WAL_WAIT:
                return begun
            workflow.set_current_details(f"waiting: {begun.message}")
            await workflow.sleep(WAL_LOOK, summary="until the archiver stores that WAL")
            waited += WAL_LOOK

    async def _watch(
        self, begun: RestoreTestBegun, instance: str, end: RestoreTestEnd
    ) -> RestoreTestEnd:
        """Look at the throwaway until the test is over, or its time is up."""
        timeout = timedelta(seconds=begun.timeout_seconds)
        while True:
            verdict: Verdict = await workflow.execute_activity(
                pipeline.CHECK_RESTORE_TEST,
                args=[end.namespace, instance],
                result_type=Verdict,
                start_to_close_timeout=SHORT,
                retry_policy=SHORT_RETRY,
                summary=f"check: is {instance} Ready",
            )
            if verdict.over:
                said = {"succeeded": verdict.succeeded, "reason": verdict.reason}
                return end.model_copy(update={**said, "message": verdict.message})
            elapsed = workflow.now() - end.started_at
            if elapsed >= timeout:
                message = f"{instance} was not Ready within {timeout}; last: {verdict.message}"
                return end.model_copy(update={"reason": Reason.TIMED_OUT, "message": message})
            workflow.set_current_details(f"restoring into **{instance}**: {verdict.message}")
            wait = min(max(FIRST_LOOK, elapsed / 10), LAST_LOOK)
            await workflow.sleep(wait, summary=f"until {instance}'s next look")

    async def _end(self, end: RestoreTestEnd) -> RestoreTestEnd:
        """Delete the throwaway, write the result, wake the tested instance."""
        end = end.model_copy(update={"finished_at": workflow.now()})
        await workflow.execute_activity(
            pipeline.END_RESTORE_TEST,
            end,
            start_to_close_timeout=SHORT,
            retry_policy=SHORT_RETRY,
            summary=f"end: {'succeeded' if end.succeeded else 'failed'}; throwaway deleted",
        )
        instance = workflow.get_external_workflow_handle(names.workflow_id(end.namespace, end.name))
        try:
            await instance.signal(names.WAKE, Wake(reason="restore test ended"))
        except Exception:  # no workflow runs for it: its next one reads the status
            workflow.logger.info("no workflow of %s/%s to wake", end.namespace, end.name)
        return end
