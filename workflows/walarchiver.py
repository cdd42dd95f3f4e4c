"""DBWalArchiverWorkflow: each running instance with ``spec.backup`` hands the WAL its
guest spooled to its backup store (``activities.operations.walarchive``), once; a
Temporal Schedule starts one a minute (``names.wal_archiver_schedule_id``, made by the
worker when it starts). Its result says, per instance, what the visit did.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline

ARCHIVE_TIMEOUT = timedelta(minutes=10)
ARCHIVE_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=3)


@workflow.defn(name=names.WAL_ARCHIVER_WORKFLOW_TYPE)
class DBWalArchiverWorkflow:
    @workflow.run
    async def run(self) -> dict[str, str]:
        said: dict[str, str] = await workflow.execute_activity(
            pipeline.ARCHIVE_WAL,
            result_type=dict[str, str],
            task_queue=names.long_task_queue(workflow.info().task_queue),
            start_to_close_timeout=ARCHIVE_TIMEOUT,
            heartbeat_timeout=timedelta(minutes=2),
            retry_policy=ARCHIVE_RETRY,
            summary="archive WAL: each instance's spooled WAL, into its store",
        )
        return said
