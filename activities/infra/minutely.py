"""The install's own Temporal Schedules, each starting one workflow a minute on the
worker's task queue: the backup reaper (``workflows.reaper``) and the WAL archiver
(``workflows.walarchiver``). The worker makes those missing when it starts."""

from __future__ import annotations

import logging
from datetime import timedelta

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
)

from dbi import names

log = logging.getLogger("dbi.schedules")
NOTE = "dbi: "

EVERY_MINUTE = timedelta(minutes=1)
# The install's own Schedules, each starting one workflow a minute: its id, the
# workflow's type, and its note.
MINUTELY = (
    (
        names.reaper_schedule_id,
        names.REAPER_WORKFLOW_TYPE,
        "the files of deleted DBBackups leave the store",
    ),
    (
        names.wal_archiver_schedule_id,
        names.WAL_ARCHIVER_WORKFLOW_TYPE,
        "each instance's WAL goes to its backup store",
    ),
)


async def ensure_minutely(client: Client, task_queue: str) -> list[str]:
    """Create the install's Schedules (``MINUTELY``: the backup reaper, the WAL
    archiver) that do not exist; return the ids of those that could not be made."""
    failed = []
    for schedule_id_of, workflow_type, note in MINUTELY:
        schedule_id = schedule_id_of(task_queue)
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                workflow_type, id=schedule_id, task_queue=task_queue
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=EVERY_MINUTE)]),
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.SKIP),
            state=ScheduleState(note=NOTE + note),
        )
        try:
            await client.create_schedule(schedule_id, schedule)
        except ScheduleAlreadyRunningError:
            pass
        except Exception as e:  # the rest of dbi runs without it
            log.warning("could not create the Schedule %s: %s", schedule_id, e)
            failed.append(schedule_id)
    return failed
