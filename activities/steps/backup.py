"""backup (BackupScheduled): the instance's Temporal Schedule, as spec.backup asks.

With ``spec.backup``: one schedule (``names.schedule_id``) that starts
DBBackupWorkflow on ``spec.backup.schedule``, paused while ``spec.backup.suspended``;
created when missing, updated when it differs (Pending), then Satisfied. Without it:
the schedule is deleted if there is one. Idempotency key: the schedule's id, derived
from the instance's; a create that finds it there already leaves it to the next look.
A worker without Temporal access for steps (the benchmark's in-process peer) says so
and goes on. Backups already taken are never touched here (``prune_backups`` applies
retention after each backup). A ``dbi.dev/backup-requested-at`` value not served yet
starts one backup first (its workflow id derives from the value: started once);
served once this step is Satisfied, as ``dbi backup NAME`` would.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import backupstore
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.infra.reads import spares_reads
from activities.infra.schedules import Seen, Wanted
from activities.steps.loop import Anatomy
from dbi import names
from dbi.backups import Trigger
from dbi.pipeline import BACKUP as SPEC
from dbi.steps import AT_ONCE, Common, Decision, StepInput


class Reason(StrEnum):
    SCHEDULED = SPEC.condition_type
    NOT_ASKED = "NotRequested"
    NO_STORE = "NoBackupStore"
    NO_SCHEDULES = "SchedulesUnavailable"
    CREATED = "ScheduleCreated"
    UPDATED = "ScheduleUpdated"
    DELETED = Common.SCHEDULE_DELETED
    REQUESTED = "BackupRequested"


class Action(StrEnum):
    START = "start-requested-backup"  # the backup dbi.dev/backup-requested-at asks for
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, kw_only=True)
class Observation:
    wanted: Wanted | None  # None: spec.backup is unset
    seen: Seen | None  # None: no schedule
    schedules: bool = True  # whether this worker reaches Temporal Schedules
    store_problem: str | None = None  # why the instance's backups have no store
    # dbi.dev/backup-requested-at not served yet, and whether its backup was started.
    requested: str | None = None
    requested_started: bool = False


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the change to make to the schedule (pure)."""
    if not obs.schedules:
        message = "This worker manages no Temporal Schedules; backups are not scheduled."
        return SPEC.satisfied(Reason.NO_SCHEDULES, message)
    if obs.requested is not None and not obs.requested_started:
        message = "The backup dbi.dev/backup-requested-at asks for was started."
        return SPEC.pending(Reason.REQUESTED, message, Action.START, after=AT_ONCE)
    if obs.wanted is None:
        return _unwanted(obs.seen)
    return _scheduled(obs.wanted, obs.seen, store_problem=obs.store_problem)


def _scheduled(wanted: Wanted, seen: Seen | None, *, store_problem: str | None) -> Decision[Action]:
    """With spec.backup: the schedule created, or made what it says."""
    if store_problem is not None:
        message = f"spec.backup asks for backups, but they have no store: {store_problem}."
        return SPEC.terminal(Reason.NO_STORE, message[:512])
    if seen is None:
        return SPEC.pending(
            Reason.CREATED, "The backup schedule was created.", Action.CREATE, after=AT_ONCE
        )
    if seen != Seen(schedule=wanted.schedule, paused=wanted.paused):
        return SPEC.pending(
            Reason.UPDATED, "The backup schedule was updated.", Action.UPDATE, after=AT_ONCE
        )
    state = "suspended" if wanted.paused else "active"
    message = f"Backups on {wanted.schedule!r} (UTC), {state}."
    return SPEC.satisfied(Reason.SCHEDULED, message)


def _unwanted(seen: Seen | None) -> Decision[Action]:
    """Without spec.backup: delete the schedule there is."""
    if seen is not None:
        message = "spec.backup is unset; the schedule was deleted."
        return SPEC.pending(Reason.DELETED, message, Action.DELETE, after=AT_ONCE)
    return SPEC.satisfied(Reason.NOT_ASKED, "No backups are scheduled.")


def wanted(instance: Instance) -> Wanted | None:
    backup = instance.model.spec.backup
    return None if backup is None else Wanted(schedule=backup.schedule, paused=backup.suspended)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if ctx.schedules is None:
        return Observation(wanted=wanted(instance), seen=None, schedules=False)
    requested = step_input.backup_requested
    return Observation(
        wanted=wanted(instance),
        seen=ctx.schedules.describe(schedule_id(instance), spare=spares_reads),
        store_problem=_store_problem(ctx, instance),
        requested=requested,
        requested_started=requested is not None
        and ctx.schedules.run(requested_id(instance, requested)) is not None,
    )


def _store_problem(ctx: Context, instance: Instance) -> str | None:
    """Why the instance's backups could not be stored now (None: they can); only asked
    when spec.backup is set (a target's Secret is read)."""
    if instance.model.spec.backup is None:
        return None
    try:
        backupstore.for_instance(ctx.kube, ctx.config, instance)
    except ValueError as e:
        return str(e)
    return None


def requested_id(instance: Instance, request: str) -> str:
    return names.requested_backup_id(instance.namespace, instance.name, request)


def schedule_id(instance: Instance) -> str:
    return names.schedule_id(instance.namespace, instance.name)


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    assert ctx.schedules is not None
    if action is Action.START and obs.requested is not None:
        workflow_id = requested_id(instance, obs.requested)
        ctx.schedules.start(instance.namespace, instance.name, Trigger.MANUAL, workflow_id)
    elif action is Action.DELETE:
        ctx.schedules.delete(instance.namespace, instance.name)
    elif action is Action.CREATE and obs.wanted is not None:
        ctx.schedules.create(instance.namespace, instance.name, obs.wanted)
    elif obs.wanted is not None:
        ctx.schedules.update(instance.namespace, instance.name, obs.wanted)


STEP = Anatomy(SPEC, observe, decide, act)
