"""teardown_backup (BackupScheduleRemoved): the instance's backup schedule goes first.

Deleting a DBInstance deletes its Temporal Schedule, so no backup of an instance being
torn down starts; one already running finds the instance gone or deleting and records
nothing. The DBBackups and their files stay: they outlive the instance, so it can be
restored. Idempotency key: the schedule's id; deleting one already gone is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities import backup_schedule
from activities.kube import Instance
from activities.step import Anatomy, Context
from dbi.pipeline import TEARDOWN_BACKUP as SPEC
from dbi.steps import AT_ONCE, Decision, Outcome, StepInput


class Reason(StrEnum):
    REMOVED = SPEC.condition_type
    DELETED = "ScheduleDeleted"


@dataclass(frozen=True)
class Observation:
    scheduled: bool


def decide(obs: Observation) -> Decision[bool]:
    """Delete the schedule while there is one (pure)."""
    if obs.scheduled:
        message = "The backup schedule was deleted; backups taken stay."
        result = SPEC.result(
            Outcome.PENDING, Reason.DELETED, message, requeue_after_seconds=AT_ONCE
        )
        return Decision(result, True)
    return Decision(SPEC.result(Outcome.SATISFIED, Reason.REMOVED, "No backup schedule is left."))


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if ctx.schedules is None:
        return Observation(scheduled=False)
    return Observation(
        scheduled=ctx.schedules.describe(backup_schedule.schedule_id(instance)) is not None
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: bool) -> None:
    assert ctx.schedules is not None
    ctx.schedules.delete(instance.namespace, instance.name)


STEP = Anatomy(SPEC, observe, decide, act)
