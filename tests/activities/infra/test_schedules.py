"""The backup step's describe of a schedule, against the dev server: an idle pass (and a
re-check) takes this worker's describe from the last hour, and what rests on it acts on
nothing before a fresh read (``activities.infra.schedules``); the restore-test schedule
beside the backup one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, ScheduleActionStartWorkflow

from activities.infra.reads import Spared, Stale, confirm_fresh, shared_reads, spares_reads
from activities.infra.schedules import Schedules, Seen, Wanted
from dbi import names

pytestmark = pytest.mark.stack

DAILY = Wanted(schedule="@daily", paused=False)


async def in_thread(call: Callable[[], Any]) -> Any:
    """Run ``call`` as a step does: on a thread, the client's calls handed to the loop."""
    return await asyncio.to_thread(call)


def idle(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` inside an idle pass's block of reads."""

    def run() -> Any:
        with shared_reads(idle=True):
            return call()

    return run


def described(schedules: Schedules, schedule_id: str) -> Callable[[], Seen | None]:
    """The backup step's describe of ``schedule_id``."""
    return lambda: schedules.describe(schedule_id, spare=spares_reads)


@pytest.fixture
async def schedules(temporal_client: Client) -> Schedules:
    return Schedules(temporal_client, asyncio.get_running_loop(), "dbi-test", Spared(16))


async def test_an_idle_describe_takes_the_one_from_the_last_hour(
    schedules: Schedules, temporal_client: Client
) -> None:
    namespace, name = "team-a", f"db-{uuid.uuid4().hex[:8]}"
    schedule_id = names.schedule_id(namespace, name)
    describe = described(schedules, schedule_id)
    await in_thread(lambda: schedules.create(namespace, name, DAILY))
    try:
        assert await in_thread(describe) == Seen("@daily", paused=False)
        # A hand pauses it in Temporal's UI: a woken pass sees it at once, an idle pass
        # that has this worker's describe from the last hour does not (the server is
        # not asked), until the kept describe is an hour old.
        await temporal_client.get_schedule_handle(schedule_id).pause(note="by hand")
        assert await in_thread(idle(describe)) == Seen("@daily", paused=False)
        assert await in_thread(describe) == Seen(None, paused=True)
        assert await in_thread(idle(describe)) == Seen(None, paused=True)
        # The step makes it what spec.backup says: this worker's write drops what it
        # kept, and the next idle describe asks the server.
        await in_thread(lambda: schedules.update(namespace, name, DAILY))
        assert await in_thread(idle(describe)) == Seen("@daily", paused=False)
    finally:
        await in_thread(lambda: schedules.delete(namespace, name))
    assert await in_thread(idle(describe)) is None


async def test_what_rests_on_a_kept_describe_acts_only_after_a_fresh_read(
    schedules: Schedules,
) -> None:
    """An idle pass whose step would act on a kept describe raises Stale before it
    writes (the pass then runs again with every read made); one that asked the server
    may act."""
    describe = described(schedules, names.schedule_id("team-a", f"db-{uuid.uuid4().hex[:8]}"))

    def acts() -> None:
        describe()
        confirm_fresh()  # what activities.steps.loop does before a step acts

    await in_thread(idle(acts))  # nothing kept yet: the server answered
    with pytest.raises(Stale):
        await in_thread(idle(acts))
    await in_thread(acts)  # a woken pass's block reads afresh


async def test_a_restore_test_schedule_starts_restore_tests_spread_and_goes_alone(
    schedules: Schedules, temporal_client: Client
) -> None:
    """spec.backup.restoreTest's schedule starts DBRestoreTestWorkflow for the instance,
    each run up to a tenth of its interval late (a fleet's tests spread); deleting it
    leaves the backup schedule, and deleting the instance's schedules takes both."""
    namespace, name = "team-a", f"db-{uuid.uuid4().hex[:8]}"
    weekly = Wanted(schedule="@weekly", paused=False, restore_test=True)
    tests, backups = (
        names.restore_test_schedule_id(namespace, name),
        names.schedule_id(namespace, name),
    )
    await in_thread(lambda: schedules.create(namespace, name, DAILY))
    await in_thread(lambda: schedules.create(namespace, name, weekly))
    try:
        assert await in_thread(described(schedules, tests)) == Seen("@weekly", paused=False)
        found = await temporal_client.get_schedule_handle(tests).describe()
        action = found.schedule.action
        assert isinstance(action, ScheduleActionStartWorkflow)
        assert action.workflow == names.RESTORE_TEST_WORKFLOW_TYPE
        assert found.schedule.spec.jitter == timedelta(hours=1)  # a week's tenth, at most 1h
        await in_thread(lambda: schedules.delete(namespace, name, restore_test=True))
        assert await in_thread(described(schedules, tests)) is None
        assert await in_thread(described(schedules, backups)) == Seen("@daily", paused=False)
        await in_thread(lambda: schedules.create(namespace, name, weekly))
    finally:
        await in_thread(lambda: schedules.delete(namespace, name))
    assert await in_thread(described(schedules, tests)) is None
    assert await in_thread(described(schedules, backups)) is None
