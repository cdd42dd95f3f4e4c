"""Temporal as the backup steps see it: one Schedule per instance, that starts its
backups, and the final backup of an instance being deleted.

Steps run in the worker's threads; the Temporal client is asynchronous and bound to the
worker's event loop, so each call here is handed to that loop and waited for, with a
timeout (``asyncio.run_coroutine_threadsafe``). What dbi asked for is kept on the
schedule itself: its note holds ``spec.backup.schedule`` as written (the server turns
cron strings into calendars, which do not read back as written).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from dbi.backups import BackupRequest, BackupResult, Trigger

T = TypeVar("T")
CALL_TIMEOUT_SECONDS = 30.0
# A run missed while the server or workers were down is still taken this long after.
CATCHUP = timedelta(hours=1)
_NOTE = "dbi: "


@dataclass(frozen=True)
class Wanted:
    """The schedule an instance asks for."""

    schedule: str  # spec.backup.schedule, as written
    paused: bool


@dataclass(frozen=True)
class Run:
    """One backup workflow (the final one of spec.backup.onDelete, or one an annotation
    asked for), as the server has it."""

    running: bool
    result: BackupResult | None = None  # None while it runs, or when it failed or was ended


@dataclass(frozen=True)
class Seen:
    """A schedule as the server describes it."""

    schedule: str | None  # what dbi wrote in its note; None: not dbi's note
    paused: bool


class Schedules:
    """The worker's Temporal client, callable from a step's thread."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop, task_queue: str) -> None:
        self.client = client
        self.loop = loop
        self.task_queue = task_queue

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(CALL_TIMEOUT_SECONDS)

    def describe(self, schedule_id: str) -> Seen | None:
        """The schedule, or None when there is none."""
        return self._call(self._describe(schedule_id))

    async def _describe(self, schedule_id: str) -> Seen | None:
        try:
            found = await self.client.get_schedule_handle(schedule_id).describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        note = found.schedule.state.note or ""
        written = note.removeprefix(_NOTE) if note.startswith(_NOTE) else None
        return Seen(schedule=written, paused=found.schedule.state.paused)

    def create(self, namespace: str, name: str, wanted: Wanted) -> None:
        """Create the instance's schedule; one that exists already is left for the next
        look to compare."""

        async def create() -> None:
            with contextlib.suppress(ScheduleAlreadyRunningError):
                await self.client.create_schedule(
                    names.schedule_id(namespace, name), self._schedule(namespace, name, wanted)
                )

        self._call(create())

    def update(self, namespace: str, name: str, wanted: Wanted) -> None:
        """Make the instance's schedule what ``wanted`` says."""
        schedule = self._schedule(namespace, name, wanted)

        def updated(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        handle = self.client.get_schedule_handle(names.schedule_id(namespace, name))
        self._call(handle.update(updated))

    def delete(self, namespace: str, name: str) -> None:
        """Delete the instance's schedule; one already gone is fine. Backups it started
        run on."""

        async def delete() -> None:
            try:
                await self.client.get_schedule_handle(names.schedule_id(namespace, name)).delete()
            except RPCError as e:
                if e.status != RPCStatusCode.NOT_FOUND:
                    raise

        self._call(delete())

    def run(self, workflow_id: str) -> Run | None:
        """The backup workflow of that id; None when none was started."""
        return self._call(self._run(workflow_id))

    async def _run(self, workflow_id: str) -> Run | None:
        handle = self.client.get_workflow_handle(workflow_id, result_type=BackupResult)
        try:
            described = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if described.status is WorkflowExecutionStatus.RUNNING:
            return Run(running=True)
        if described.status is not WorkflowExecutionStatus.COMPLETED:
            return Run(running=False)
        return Run(running=False, result=await handle.result())

    def start(self, namespace: str, name: str, trigger: Trigger, workflow_id: str) -> None:
        """Start a backup of the instance under ``workflow_id``; one started already under
        it is left as it is (the id is the idempotency key)."""

        async def start() -> None:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await self.client.start_workflow(
                    names.BACKUP_WORKFLOW_TYPE,
                    BackupRequest(namespace=namespace, name=name, trigger=trigger),
                    id=workflow_id,
                    task_queue=self.task_queue,
                    search_attributes=names.instance_attributes(namespace, name),
                )

        self._call(start())

    def _schedule(self, namespace: str, name: str, wanted: Wanted) -> Schedule:
        attributes = names.instance_attributes(namespace, name)
        return Schedule(
            action=ScheduleActionStartWorkflow(
                names.BACKUP_WORKFLOW_TYPE,
                BackupRequest(namespace=namespace, name=name, trigger=Trigger.SCHEDULE),
                id=names.backup_workflow_id(namespace, name),
                task_queue=self.task_queue,
                typed_search_attributes=attributes,
            ),
            spec=ScheduleSpec(cron_expressions=[wanted.schedule]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=CATCHUP),
            state=ScheduleState(note=_NOTE + wanted.schedule, paused=wanted.paused),
        )
