"""A workflow that reads the wall clock: what workflow code must never do (a replay
would see another time). ``test_workflow_runner`` runs it in and out of the sandbox."""

from __future__ import annotations

from datetime import UTC, datetime

from temporalio import workflow


@workflow.defn
class ReadsTheClock:
    @workflow.run
    async def run(self) -> str:
        return datetime.now(UTC).isoformat()
