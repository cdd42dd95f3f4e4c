"""DBBackupReaperWorkflow: give back the files of DBBackups deleted by hand or with
their namespace (``activities.operations.reaper``), once; a Temporal Schedule starts one a minute
(``names.reaper_schedule_id``, made by the worker when it starts).

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline

REAP_TIMEOUT = timedelta(minutes=10)
REAP_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3)


@workflow.defn(name=names.REAPER_WORKFLOW_TYPE)
class DBBackupReaperWorkflow:
    @workflow.run
    async def run(self) -> list[str]:
        reaped: list[str] = await workflow.execute_activity(
            pipeline.REAP_BACKUPS,
            result_type=list[str],
            start_to_close_timeout=REAP_TIMEOUT,
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=REAP_RETRY,
            summary="reap: the files of DBBackups being deleted, then let them go",
        )
        return reaped
