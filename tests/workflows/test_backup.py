"""DBBackupWorkflow in the time-skipping environment, with stub activities: the order of
its activities, and how a backup that cannot be taken or fails is recorded."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from dbi.backups import (
    BackupPhase,
    BackupRequest,
    BackupResult,
    Begun,
    Finish,
    Reason,
    Taken,
    Trigger,
)
from tests.workflows.backups import TAKEN
from tests.workflows.conftest import _record
from workflows.backup import DBBackupWorkflow
from workflows.worker import Tuning, build_worker

REQUEST = BackupRequest(namespace="team-a", name="orders", trigger=Trigger.SCHEDULE)


@dataclass
class Script:
    """What the stub activities answer, and what they were called with."""

    begun: Callable[[str], Begun] = lambda name: Begun(backup=name, uid="u1")
    take: Callable[[int], Taken] = lambda attempt: TAKEN
    calls: list[str] = field(default_factory=list)
    finished: list[Finish] = field(default_factory=list)

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name=pipeline.BEGIN_BACKUP)
        async def begin(request: BackupRequest, backup: str) -> Begun:
            self.calls.append("begin")
            return self.begun(backup)

        @activity.defn(name=pipeline.TAKE_BACKUP)
        async def take(begun: Begun, request: BackupRequest) -> Taken:
            self.calls.append("take")
            return self.take(activity.info().attempt)

        @activity.defn(name=pipeline.FINISH_BACKUP)
        async def finish(finish: Finish) -> None:
            self.calls.append("finish")
            self.finished.append(finish)

        @activity.defn(name=pipeline.PRUNE_BACKUPS)
        async def prune(request: BackupRequest) -> list[str]:
            self.calls.append("prune")
            return ["orders-20261101-030000"]

        return [begin, take, finish, prune]


async def run(env: WorkflowEnvironment, script: Script) -> BackupResult:
    queue = f"backup-{uuid.uuid4()}"
    # The production worker's split: the long activities on their own task queue.
    async with build_worker(
        env.client, script.activities(), task_queue=queue, tuning=Tuning(sandboxed=True)
    ):
        handle = await env.client.start_workflow(
            DBBackupWorkflow.run,
            REQUEST,
            id=f"dbbackup/team-a/orders-{uuid.uuid4()}",
            task_queue=queue,
        )
        result = await handle.result()
        if os.environ.get("DBI_RECORD_HISTORIES"):
            await _record(env, handle)
    return result


async def test_a_backup_is_recorded_taken_finished_then_pruned(
    time_env: WorkflowEnvironment,
) -> None:
    """begin, take, finish (Completed with what was taken), retention: in that order."""
    script = Script()
    result = await run(time_env, script)
    assert script.calls == ["begin", "take", "finish", "prune"]
    assert script.finished[0].taken == TAKEN and script.finished[0].reason is None
    assert result.phase is BackupPhase.COMPLETED and result.size_bytes == 4096
    assert result.pruned == ["orders-20261101-030000"]
    assert result.backup is not None and result.backup.startswith("orders-")


def refused(attempt: int) -> Taken:
    raise ApplicationError(
        "pg_hba.conf predates backups", type=Reason.REPLICATION_REFUSED, non_retryable=True
    )


def flaky(attempt: int) -> Taken:
    raise ApplicationError(
        f"pg_basebackup exited 1 (attempt {attempt})", type=Reason.PG_BASEBACKUP_FAILED
    )


def unnamed(attempt: int) -> Taken:
    raise RuntimeError(f"non-XML response from server; Body: internal-secret-{attempt}")


@pytest.mark.parametrize(
    ("take", "attempts", "reason", "said"),
    [
        pytest.param(
            refused, 1, "ReplicationRefused", "pg_hba.conf predates backups", id="refused"
        ),
        pytest.param(
            flaky,
            3,
            "PgBasebackupFailed",
            "pg_basebackup exited 1 (attempt 3)",
            id="three-failures-in-dbis-words",
        ),
        pytest.param(
            unnamed,
            3,
            "BackupFailed",
            "the worker's log says why",
            id="an-error-dbi-did-not-word-says-nothing-of-itself",
        ),
    ],
)
async def test_a_backup_that_fails_is_finished_failed_with_its_reason_and_not_pruned(
    time_env: WorkflowEnvironment,
    take: Callable[[int], Taken],
    attempts: int,
    reason: str,
    said: str,
) -> None:
    """A non-retryable refusal fails at once, another error after three attempts; either
    way the DBBackup is finished Failed with the reason, and retention does not run. Its
    message is what dbi said, never what an error it did not word carried (a store's
    answer, which the tenant reads in the DBBackup)."""
    script = Script(take=take)
    result = await run(time_env, script)
    assert script.calls == ["begin", *["take"] * attempts, "finish"]
    [finish] = script.finished
    assert finish.taken is None and finish.reason == reason and said in (finish.message or "")
    assert "internal-secret" not in (finish.message or "")
    assert result.phase is BackupPhase.FAILED and result.reason == reason


async def test_a_backup_of_a_stopped_instance_is_recorded_failed_without_taking_it(
    time_env: WorkflowEnvironment,
) -> None:
    """begin_backup's reason (the instance is not running) goes to the DBBackup as is."""
    script = Script(
        begun=lambda name: Begun(
            backup=name, uid="u1", reason="InstanceNotRunning", message="Start it."
        )
    )
    result = await run(time_env, script)
    assert script.calls == ["begin", "finish"]
    assert script.finished[0].reason == "InstanceNotRunning"
    assert result.phase is BackupPhase.FAILED


async def test_a_backup_of_a_gone_instance_records_nothing(time_env: WorkflowEnvironment) -> None:
    """No DBBackup when the instance is gone: the workflow ends, saying why."""
    script = Script(
        begun=lambda name: Begun(reason="InstanceGone", message="The instance is gone.")
    )
    result = await run(time_env, script)
    assert script.calls == ["begin"]
    assert result.backup is None and result.reason == "InstanceGone"
