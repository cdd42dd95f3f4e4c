"""DBBackupWorkflow: one backup of one DBInstance, from its record to retention.

Started by the instance's Temporal Schedule (``spec.backup.schedule``) or by
``dbi backup NAME``. It records the backup as a DBBackup (``begin_backup``), takes it
(``take_backup``: pg_basebackup into the store, heartbeating, retried on another worker
if this one dies), writes how it ended (``finish_backup``: Completed, or Failed with a
reason and nothing left in the store), then applies the instance's retention
(``prune_backups``). The workflow never fails because a backup did: the DBBackup says
Failed, and the result says why. Each activity's summary names what it does, for the
Temporal UI.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline
    from dbi.backups import (
        BackupPhase,
        BackupRequest,
        BackupResult,
        Begun,
        Finish,
        Reason,
        Taken,
        backup_name,
    )

# The failures whose message is dbi's own words (a DBBackup shows it).
_WORDED = frozenset(Reason)
SHORT = timedelta(seconds=30)
SHORT_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)
# pg_basebackup heartbeats every 2 s; a worker silent for this long is gone, and the
# backup starts again on another. A failure other than a lost worker is tried 3 times.
TAKE_HEARTBEAT = timedelta(seconds=20)
TAKE_TIMEOUT = timedelta(hours=12)
TAKE_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=5), maximum_interval=timedelta(minutes=1), maximum_attempts=3
)


@workflow.defn(name=names.BACKUP_WORKFLOW_TYPE)
class DBBackupWorkflow:
    @workflow.run
    async def run(self, request: BackupRequest) -> BackupResult:
        name = backup_name(request.name, workflow.now())
        workflow.set_current_details(f"backup **{name}** of {request.namespace}/{request.name}")
        begun: Begun = await workflow.execute_activity(
            pipeline.BEGIN_BACKUP,
            args=[request, name],
            result_type=Begun,
            start_to_close_timeout=SHORT,
            retry_policy=SHORT_RETRY,
            summary=f"begin: record DBBackup {name}",
        )
        if begun.backup is None:  # the instance is gone, or the name is another's
            return BackupResult(backup=None, phase=None, reason=begun.reason, message=begun.message)
        finish = Finish(
            namespace=request.namespace, name=request.name, backup=begun.backup, uid=begun.uid
        )
        if begun.reason is None:
            finish = await self._take(begun, request, finish)
        else:
            finish = finish.model_copy(update={"reason": begun.reason, "message": begun.message})
        await workflow.execute_activity(
            pipeline.FINISH_BACKUP,
            finish,
            start_to_close_timeout=SHORT,
            retry_policy=SHORT_RETRY,
            summary=f"finish: {'Completed' if finish.taken else 'Failed'}",
        )
        pruned: list[str] = []
        if finish.taken is not None:
            pruned = await workflow.execute_activity(
                pipeline.PRUNE_BACKUPS,
                request,
                result_type=list[str],
                start_to_close_timeout=timedelta(minutes=10),
                retry_policy=SHORT_RETRY,
                summary="retention: delete what spec.backup.retention no longer keeps",
            )
        return BackupResult(
            backup=begun.backup,
            phase=BackupPhase.COMPLETED if finish.taken else BackupPhase.FAILED,
            reason=finish.reason,
            message=finish.message,
            size_bytes=finish.taken.size_bytes if finish.taken else None,
            pruned=pruned,
        )

    async def _take(self, begun: Begun, request: BackupRequest, finish: Finish) -> Finish:
        try:
            taken: Taken = await workflow.execute_activity(
                pipeline.TAKE_BACKUP,
                args=[begun, request],
                result_type=Taken,
                task_queue=names.long_task_queue(workflow.info().task_queue),
                start_to_close_timeout=TAKE_TIMEOUT,
                heartbeat_timeout=TAKE_HEARTBEAT,
                retry_policy=TAKE_RETRY,
                summary=f"take: pg_basebackup of {request.name} to the store",
            )
        except ActivityError as e:
            # What the activity said in its own words (an ApplicationError: dbi's, never
            # a store's answer) is the message, its type the reason when it named one;
            # anything else (a lost worker, an error dbi did not name) says only that
            # it failed: the DBBackup's status is the tenant's to read.
            cause = e.cause
            reason, said = Reason.FAILED.value, ""
            if isinstance(cause, ApplicationError) and cause.type in _WORDED:
                reason, said = cause.type, cause.message
            message = said or "The backup failed; the worker's log says why."
            return finish.model_copy(update={"reason": reason, "message": message[:1024]})
        return finish.model_copy(update={"taken": taken})
