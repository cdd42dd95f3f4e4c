"""Long work never holds a step's slot: a worker runs at most DBI_LONG_ACTIVITIES
backups at once, on the long task queue, and the activities on the task queue go on
however many backups wait (the real dev server, stub activities)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowHandle

from dbi import names, pipeline
from dbi.backups import BackupPhase, BackupRequest, BackupResult, Begun, Finish, Trigger
from tests.polling import until
from tests.workflows.backups import TAKEN
from workflows.worker import ACTIVITY_THREADS, Tuning, build_worker

pytestmark = pytest.mark.stack

LONG = 2
BACKUPS = ACTIVITY_THREADS + 2  # more than the steps' slots: on one queue, they'd fill them


class Backups:
    """Stub activities: begin and finish at once; take until released, heartbeating."""

    def __init__(self) -> None:
        self.begun = 0
        self.taking = 0
        self.most_taking = 0
        self.release = asyncio.Event()

    def activities(self) -> list[Any]:
        @activity.defn(name=pipeline.BEGIN_BACKUP)
        async def begin(request: BackupRequest, backup: str) -> Begun:
            self.begun += 1
            return Begun(backup=backup, uid="u1")

        @activity.defn(name=pipeline.TAKE_BACKUP)
        async def take(begun: Begun, request: BackupRequest) -> Any:
            self.taking += 1
            self.most_taking = max(self.most_taking, self.taking)
            try:
                while not self.release.is_set():
                    activity.heartbeat()
                    await asyncio.sleep(0.5)
            finally:
                self.taking -= 1
            return TAKEN

        @activity.defn(name=pipeline.FINISH_BACKUP)
        async def finish(finish: Finish) -> None:
            return None

        @activity.defn(name=pipeline.PRUNE_BACKUPS)
        async def prune(request: BackupRequest) -> list[str]:
            return []

        return [begin, take, finish, prune]


async def test_waiting_backups_never_hold_the_task_queues_slots(temporal_client: Client) -> None:
    """34 backups, each holding its take until released: every one's begin (an activity
    on the task queue, where the steps run) completes while at most 2 takes run; once
    released, all complete."""
    queue = f"long-{uuid.uuid4().hex[:8]}"
    stubs = Backups()
    tuning = Tuning(long_activities=LONG)
    async with build_worker(temporal_client, stubs.activities(), task_queue=queue, tuning=tuning):

        async def backup(n: int) -> WorkflowHandle[Any, BackupResult]:
            return await temporal_client.start_workflow(
                names.BACKUP_WORKFLOW_TYPE,
                BackupRequest(namespace="team-a", name=f"db-{n}", trigger=Trigger.MANUAL),
                id=f"dbbackup/team-a/db-{n}-{uuid.uuid4().hex[:6]}",
                task_queue=queue,
                result_type=BackupResult,
            )

        handles = [await backup(n) for n in range(BACKUPS)]
        await until(lambda: stubs.begun == BACKUPS, what="every backup's begin to run")
        assert stubs.taking == LONG and stubs.most_taking == LONG
        handles.append(await backup(BACKUPS))  # one more, its takes all waiting
        await until(lambda: stubs.begun == BACKUPS + 1, what="a begin while takes wait")
        stubs.release.set()
        results = await asyncio.wait_for(asyncio.gather(*(h.result() for h in handles)), 120)
    assert {r.phase for r in results} == {BackupPhase.COMPLETED}
