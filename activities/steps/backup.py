"""backup (BackupScheduled): the instance's Temporal Schedule, as spec.backup asks.

With ``spec.backup``: one schedule (``names.schedule_id``) that starts
DBBackupWorkflow on ``spec.backup.schedule``, paused while ``spec.backup.suspended``;
created when missing, updated when it differs (Pending), then Satisfied. Without it:
the schedule is deleted if there is one. ``spec.backup.restoreTest`` has a second
schedule (``names.restore_test_schedule_id``, starting DBRestoreTestWorkflow), made,
updated and deleted the same way once the first is as asked. Idempotency key: each
schedule's id, derived from the instance's; a create that finds it there already
leaves it to the next look.
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
    CREATE_TEST = "create-restore-test"
    UPDATE_TEST = "update-restore-test"
    DELETE_TEST = "delete-restore-test"


@dataclass(frozen=True, kw_only=True)
class Observation:
    wanted: Wanted | None  # None: spec.backup is unset
    seen: Seen | None  # None: no schedule
    # The restore-test schedule: as spec.backup.restoreTest asks (None: unset), as seen.
    test_wanted: Wanted | None = None
    test_seen: Seen | None = None
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
        return _unwanted(obs.seen, obs.test_seen)
    return _scheduled(obs, obs.wanted)


def _scheduled(obs: Observation, wanted: Wanted) -> Decision[Action]:
    """With spec.backup: the schedules created, or made what it says."""
    if obs.store_problem is not None:
        message = f"spec.backup asks for backups, but they have no store: {obs.store_problem}."
        return SPEC.terminal(Reason.NO_STORE, message[:512])
    made = _made(wanted, obs.seen, Action.CREATE, Action.UPDATE, "backup schedule")
    made = made or _made(obs.test_wanted, obs.test_seen, *_TEST_ACTIONS, "restore-test schedule")
    if made is not None:
        return made
    if obs.test_wanted is None and obs.test_seen is not None:
        message = "spec.backup.restoreTest is unset; the restore-test schedule was deleted."
        return SPEC.pending(Reason.DELETED, message, Action.DELETE_TEST, after=AT_ONCE)
    state = "suspended" if wanted.paused else "active"
    message = f"Backups on {wanted.schedule!r} (UTC), {state}."
    if obs.test_wanted is not None:
        message += f" Restore tests on {obs.test_wanted.schedule!r}."
    return SPEC.satisfied(Reason.SCHEDULED, message)


_TEST_ACTIONS = (Action.CREATE_TEST, Action.UPDATE_TEST)


def _made(
    wanted: Wanted | None, seen: Seen | None, create: Action, update: Action, which: str
) -> Decision[Action] | None:
    """A schedule created, or made what ``wanted`` says; None when it is as asked."""
    if wanted is None:
        return None
    if seen is None:
        message = f"The {which} was created."
        return SPEC.pending(Reason.CREATED, message, create, after=AT_ONCE)
    if seen != Seen(schedule=wanted.schedule, paused=wanted.paused):
        message = f"The {which} was updated."
        return SPEC.pending(Reason.UPDATED, message, update, after=AT_ONCE)
    return None


def _unwanted(seen: Seen | None, test_seen: Seen | None) -> Decision[Action]:
    """Without spec.backup: delete the schedules there are."""
    if seen is not None or test_seen is not None:
        message = "spec.backup is unset; the schedule was deleted."
        return SPEC.pending(Reason.DELETED, message, Action.DELETE, after=AT_ONCE)
    return SPEC.satisfied(Reason.NOT_ASKED, "No backups are scheduled.")


def wanted(instance: Instance) -> Wanted | None:
    backup = instance.model.spec.backup
    return None if backup is None else Wanted(schedule=backup.schedule, paused=backup.suspended)


def restore_test_wanted(instance: Instance) -> Wanted | None:
    backup = instance.model.spec.backup
    test = None if backup is None else backup.restore_test
    return None if test is None else Wanted(test.schedule, paused=False, restore_test=True)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if ctx.schedules is None:
        return Observation(wanted=wanted(instance), seen=None, schedules=False)
    requested = step_input.backup_requested
    test_id = names.restore_test_schedule_id(instance.namespace, instance.name)
    return Observation(
        wanted=wanted(instance),
        seen=ctx.schedules.describe(schedule_id(instance), spare=spares_reads),
        test_wanted=restore_test_wanted(instance),
        test_seen=ctx.schedules.describe(test_id, spare=spares_reads),
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
    elif action is Action.DELETE_TEST:
        ctx.schedules.delete(instance.namespace, instance.name, restore_test=True)
    else:
        made = obs.test_wanted if action in _TEST_ACTIONS else obs.wanted
        assert made is not None
        create = action in (Action.CREATE, Action.CREATE_TEST)
        (ctx.schedules.create if create else ctx.schedules.update)(
            instance.namespace, instance.name, made
        )


STEP = Anatomy(SPEC, observe, decide, act)
