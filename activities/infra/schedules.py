"""Temporal as the backup and upgrade steps see it: an instance's Schedules (one that
starts its backups, one that starts its restore tests), the final backup of an instance
being deleted, and an instance's major upgrade.

Steps run in the worker's threads; the Temporal client is asynchronous and bound to the
worker's event loop, so each call here is handed to that loop and waited for, with a
timeout (``asyncio.run_coroutine_threadsafe``). What dbi asked for is kept on the
schedule itself: its note holds ``spec.backup.schedule`` as written (the server turns
cron strings into calendars, which do not read back as written).

Describing a schedule is a query of its scheduler workflow on the Temporal server (9.5
ms of the dev server's CPU, 2.4 ms for one that is not there), and the backup step
describes the instance's on each pass and re-check. So an idle pass (and a re-check)
takes this worker's describe of it from the last hour when there is one (``spared``,
``activities.infra.reads.Spared``), as it takes the cloud-init Secret: the schedule changes by
a step's write (this worker's drops what it kept; another worker's kept read would make
a step act, which runs the pass again with every read made: ``activities.infra.reads.Stale``)
or by a hand in Temporal's UI or CLI, which an idle pass then sees within the hour and
a woken one at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar, cast

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

from activities.infra.minutely import NOTE as _NOTE
from activities.infra.reads import Spared
from dbi import names
from dbi.backup_spec import interval_seconds
from dbi.backups import BackupRequest, BackupResult, Trigger
from dbi.restoretest import RestoreTestRequest
from dbi.upgrades import UpgradeRequest, UpgradeResult

log = logging.getLogger("dbi.schedules")
T = TypeVar("T")
R = TypeVar("R")
CALL_TIMEOUT_SECONDS = 30.0
# A run missed while the server or workers were down is still taken this long after.
CATCHUP = timedelta(hours=1)
# A restore test starts up to a tenth of its interval late, at most this: a fleet's
# weekly tests spread over an hour, not all at midnight.
JITTER_MAX = timedelta(hours=1)


@dataclass(frozen=True)
class Wanted:
    """The schedule an instance asks for."""

    schedule: str  # spec.backup.schedule (or .restoreTest.schedule), as written
    paused: bool
    restore_test: bool = False  # the restore-test Schedule, not the backup one


@dataclass(frozen=True)
class Run:
    """One backup workflow (the final one of spec.backup.onDelete, or one an annotation
    asked for), as the server has it."""

    running: bool
    result: BackupResult | None = None  # None while it runs, or when it failed or was ended


@dataclass(frozen=True)
class Upgrade:
    """One major upgrade workflow, as the server has it."""

    running: bool
    result: UpgradeResult | None = None  # None while it runs, or when it was ended


@dataclass(frozen=True)
class Seen:
    """A schedule as the server describes it."""

    schedule: str | None  # what dbi wrote in its note; None: not dbi's note
    paused: bool


@dataclass(frozen=True)
class _Described:
    """A describe kept for an idle pass: the schedule, or None when there was none."""

    seen: Seen | None


def never() -> bool:
    """A describe that takes no kept one."""
    return False


class Schedules:
    """The worker's Temporal client, callable from a step's thread; with ``spared``, the
    describes an idle pass may take again."""

    def __init__(
        self,
        client: Client,
        loop: asyncio.AbstractEventLoop,
        task_queue: str,
        spared: Spared | None = None,
    ) -> None:
        self.client = client
        self.loop = loop
        self.task_queue = task_queue
        self.spared = spared

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(CALL_TIMEOUT_SECONDS)

    def describe(self, schedule_id: str, *, spare: Callable[[], bool] = never) -> Seen | None:
        """The schedule, or None when there is none. ``spare``: asked when this worker
        described it in the last hour; True takes that (``activities.infra.reads.spares_reads``:
        an idle pass's). A describe from the server is kept."""
        kept = self.spared.get(schedule_id) if self.spared is not None else None
        if kept is not None and spare():
            return cast(_Described, kept).seen
        seen = self._call(self._describe(schedule_id))
        if self.spared is not None:
            self.spared.put(schedule_id, _Described(seen))
        return seen

    def _forget(self, namespace: str, name: str) -> None:
        """Drop what this worker kept of the instance's schedules: it writes to them."""
        if self.spared is not None:
            self.spared.forget(names.schedule_id(namespace, name))
            self.spared.forget(names.restore_test_schedule_id(namespace, name))

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
        self._forget(namespace, name)

        async def create() -> None:
            with contextlib.suppress(ScheduleAlreadyRunningError):
                await self.client.create_schedule(
                    _id(namespace, name, wanted), self._schedule(namespace, name, wanted)
                )

        self._call(create())

    def update(self, namespace: str, name: str, wanted: Wanted) -> None:
        """Make the instance's schedule what ``wanted`` says."""
        self._forget(namespace, name)
        schedule = self._schedule(namespace, name, wanted)

        def updated(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        handle = self.client.get_schedule_handle(_id(namespace, name, wanted))
        self._call(handle.update(updated))

    def delete(self, namespace: str, name: str, *, restore_test: bool | None = None) -> None:
        """Delete the instance's schedules (``restore_test``: only that one, or only the
        backup one); one already gone is fine. Workflows they started run on."""
        self._forget(namespace, name)
        # The backup one last: a teardown that sees it gone has nothing left to delete.
        ids = [names.restore_test_schedule_id(namespace, name), names.schedule_id(namespace, name)]
        if restore_test is not None:
            ids = ids[:1] if restore_test else ids[1:]

        async def delete() -> None:
            for schedule_id in ids:
                try:
                    await self.client.get_schedule_handle(schedule_id).delete()
                except RPCError as e:
                    if e.status != RPCStatusCode.NOT_FOUND:
                        raise

        self._call(delete())

    def instances_here(self) -> set[tuple[str, str]]:
        """The (namespace, name) of each DBInstance whose workflow runs on this worker's
        task queue: the instances this install drives. Another install whose namespaces
        overlap this one's sees the same DBInstances, but each workflow runs on the queue
        of the watcher that started it."""
        return self._call(self._instances_here())

    async def _instances_here(self) -> set[tuple[str, str]]:
        query = (
            f"WorkflowType='{names.WORKFLOW_TYPE}' AND TaskQueue='{self.task_queue}'"
            " AND ExecutionStatus='Running'"
        )
        here = set()
        async for run in self.client.list_workflows(query):
            instance = names.instance_of(run.id)
            if instance is not None:
                here.add(instance)
        return here

    def run(self, workflow_id: str) -> Run | None:
        """The backup workflow of that id; None when none was started."""
        return self._call(self._run(workflow_id))

    async def _run(self, workflow_id: str) -> Run | None:
        found = await self._ended(workflow_id, BackupResult)
        return None if found is None else Run(running=found[0], result=found[1])

    async def _ended(self, workflow_id: str, result_type: type[R]) -> tuple[bool, R | None] | None:
        """Whether the workflow runs, and its result once it completed; None: not started
        (a failed or ended one has no result)."""
        handle = self.client.get_workflow_handle(workflow_id, result_type=result_type)
        try:
            described = await handle.describe()
        except RPCError as e:
            if e.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        if described.status is WorkflowExecutionStatus.RUNNING:
            return True, None
        if described.status is not WorkflowExecutionStatus.COMPLETED:
            return False, None
        return False, await handle.result()

    def upgrade(self, workflow_id: str) -> Upgrade | None:
        """The upgrade workflow of that id; None when none was started."""
        return self._call(self._upgrade(workflow_id))

    async def _upgrade(self, workflow_id: str) -> Upgrade | None:
        found = await self._ended(workflow_id, UpgradeResult)
        return None if found is None else Upgrade(running=found[0], result=found[1])

    def start_upgrade(self, request: UpgradeRequest, workflow_id: str) -> None:
        """Start the upgrade under ``workflow_id``; one started already is left as it is."""

        async def start() -> None:
            with contextlib.suppress(WorkflowAlreadyStartedError):
                await self.client.start_workflow(
                    names.UPGRADE_WORKFLOW_TYPE,
                    request,
                    id=workflow_id,
                    task_queue=self.task_queue,
                    search_attributes=names.instance_attributes(request.namespace, request.name),
                )

        self._call(start())

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
        if wanted.restore_test:
            every = timedelta(seconds=interval_seconds(wanted.schedule, datetime.now(UTC)))
            return Schedule(
                action=ScheduleActionStartWorkflow(
                    names.RESTORE_TEST_WORKFLOW_TYPE,
                    RestoreTestRequest(namespace=namespace, name=name),
                    id=names.restore_test_schedule_id(namespace, name),
                    task_queue=self.task_queue,
                    typed_search_attributes=attributes,
                ),
                spec=ScheduleSpec(
                    cron_expressions=[wanted.schedule], jitter=min(every / 10, JITTER_MAX)
                ),
                policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP, catchup_window=CATCHUP),
                state=ScheduleState(note=_NOTE + wanted.schedule),
            )
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


def _id(namespace: str, name: str, wanted: Wanted) -> str:
    if wanted.restore_test:
        return names.restore_test_schedule_id(namespace, name)
    return names.schedule_id(namespace, name)
