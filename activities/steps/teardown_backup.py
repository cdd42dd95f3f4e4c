"""teardown_backup (BackupScheduleRemoved): the backup schedule goes, the final backup is
taken, before anything else of a deleted instance.

The schedule is deleted first, so no scheduled backup of an instance being torn down
starts. Then, under ``spec.backup.onDelete`` and ``deletionPolicy: Delete`` (Retain
keeps the disks: nothing to save), the final backup: one DBBackupWorkflow per instance
(``names.final_backup_id``, keyed by the instance's UID), started once and watched
until it ends; the teardown goes on (the VM and its disks next) only once it
Completed. A final backup that failed stalls the deletion, saying why: the disks are
never deleted without the backup that was asked for (but when the namespace is being
deleted: its deletion takes the disks anyway, and no DBBackup can be made in it). The
DBBackups and their files
stay: they outlive the instance, so it can be restored. Idempotency key: the schedule's
id and the final backup's workflow id; deleting a schedule already gone, or starting a
final backup already started, is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.infra.schedules import Run
from activities.steps.loop import NAMESPACE_TERMINATING, Anatomy
from dbi import names
from dbi.backups import BackupPhase, Trigger
from dbi.pipeline import TEARDOWN_BACKUP as SPEC
from dbi.spec import DeletionPolicy
from dbi.steps import AT_ONCE, Common, Decision, StepInput

# How often a running final backup is looked at (nothing wakes the workflow when it ends).
FINAL_BACKUP_POLL_SECONDS = 5.0


class Reason(StrEnum):
    REMOVED = SPEC.condition_type
    DELETED = Common.SCHEDULE_DELETED
    FINAL_STARTED = "FinalBackupStarted"
    FINAL_RUNNING = "FinalBackupRunning"
    FINAL_TAKEN = "FinalBackupTaken"
    FINAL_FAILED = "FinalBackupFailed"
    FINAL_SKIPPED = "FinalBackupSkipped"


class Action(StrEnum):
    DELETE_SCHEDULE = "delete-schedule"
    START_FINAL = "start-final-backup"


@dataclass(frozen=True, kw_only=True)
class Observation:
    scheduled: bool
    final_asked: bool = False  # spec.backup.onDelete under deletionPolicy Delete
    final: Run | None = None  # the final backup's workflow; None: not started


def decide(obs: Observation) -> Decision[Action]:
    """Delete the schedule, then take the final backup if one is asked (pure)."""
    if obs.scheduled:
        message = "The backup schedule was deleted; backups taken stay."
        return SPEC.pending(Reason.DELETED, message, Action.DELETE_SCHEDULE, after=AT_ONCE)
    if not obs.final_asked:
        return SPEC.satisfied(Reason.REMOVED, "No backup schedule is left.")
    return _final(obs.final)


def _final(final: Run | None) -> Decision[Action]:
    """Start the final backup, wait for it, and go on once it Completed (pure)."""
    if final is None:
        message = "The final backup (spec.backup.onDelete) was started; the disks wait for it."
        return SPEC.pending(
            Reason.FINAL_STARTED, message, Action.START_FINAL, after=FINAL_BACKUP_POLL_SECONDS
        )
    if final.running:
        message = "The final backup (spec.backup.onDelete) runs; the disks wait for it."
        return SPEC.pending(Reason.FINAL_RUNNING, message, after=FINAL_BACKUP_POLL_SECONDS)
    result = final.result
    if result is not None and result.phase is BackupPhase.COMPLETED:
        message = f"The final backup {result.backup} completed; it stays after the instance."
        return SPEC.satisfied(Reason.FINAL_TAKEN, message)
    if result is not None and result.reason == NAMESPACE_TERMINATING:
        # The namespace's deletion deletes the disks whatever waits here: no use holding.
        message = "The namespace is being deleted: no final backup could be recorded in it."
        return SPEC.satisfied(Reason.FINAL_SKIPPED, message)
    why = f"{result.reason}: {result.message}" if result is not None else "its workflow ended"
    message = (
        f"The final backup failed ({why}). The disks are kept until it is taken: fix the "
        "cause and signal retry, set spec.backup.onDelete to false to delete without it, "
        "or spec.deletionPolicy to Retain to keep the disks."
    )
    return SPEC.terminal(Reason.FINAL_FAILED, message[:512])


def final_asked(instance: Instance) -> bool:
    spec = instance.model.spec
    return (
        spec.backup is not None
        and spec.backup.on_delete
        and spec.deletion_policy is DeletionPolicy.DELETE
    )


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if ctx.schedules is None:
        return Observation(scheduled=False)
    seen = ctx.schedules.describe(names.schedule_id(instance.namespace, instance.name))
    asked = final_asked(instance)
    final = (
        ctx.schedules.run(names.final_backup_id(instance.namespace, instance.name, instance.uid))
        if asked and seen is None
        else None
    )
    return Observation(scheduled=seen is not None, final_asked=asked, final=final)


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    assert ctx.schedules is not None
    if action is Action.DELETE_SCHEDULE:
        ctx.schedules.delete(instance.namespace, instance.name)
    else:
        final = names.final_backup_id(instance.namespace, instance.name, instance.uid)
        ctx.schedules.start(instance.namespace, instance.name, Trigger.DELETE, final)


STEP = Anatomy(SPEC, observe, decide, act)
