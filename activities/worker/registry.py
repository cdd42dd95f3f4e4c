"""Every activity the worker hosts, bound to one Context.

A step's activity is registered under its name in the step table (``dbi.pipeline``),
running the step's anatomy in the shared loop (``activities.steps.loop.run``); the worker
fails to start if a step of the table has no module here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.infra.context import Context
from activities.objects import database, database_release, role, role_create, role_release
from activities.objects.loop import Anatomy as ObjectAnatomy
from activities.objects.loop import run as run_object_step
from activities.objects.object import LoadObject, WriteObjectStatus
from activities.operations.backup import BeginBackup, FinishBackup
from activities.operations.basebackup import TakeBackup
from activities.operations.pgupgrade import Upgrades
from activities.operations.reaper import ReapBackups
from activities.operations.restoretest import BeginRestoreTest, CheckRestoreTest, EndRestoreTest
from activities.operations.retention import PruneBackups
from activities.operations.rotation import RotateAdminCredentials, RotateCredentials
from activities.operations.walarchive import ArchiveWal
from activities.steps import (
    access,
    admin,
    backup,
    credentials,
    health,
    monitoring,
    power,
    preflight,
    repave,
    replicas,
    resize,
    retention,
    settings,
    teardown_backup,
    teardown_finalizer,
    teardown_monitoring,
    teardown_vm,
    tls,
    upgrade,
    vm,
)
from activities.steps.loop import Anatomy
from activities.steps.loop import run as run_step
from activities.worker.instance import LoadInstance
from activities.worker.passes import Passes
from activities.worker.status import WriteStatus
from dbi import pipeline
from dbi.objects import KINDS, ObjectRef
from dbi.steps import StepInput, StepResult

MODULES = (
    preflight,
    credentials,
    vm,
    power,
    upgrade,
    repave,
    resize,
    retention,
    tls,
    admin,
    health,
    access,
    replicas,
    monitoring,
    backup,
    settings,
    teardown_backup,
    teardown_monitoring,
    teardown_vm,
    teardown_finalizer,
)
# Each step of the table, as its module defines it.
STEPS: dict[str, Anatomy[Any, Any]] = {m.STEP.spec.name: m.STEP for m in MODULES}
OTHERS = (
    LoadInstance,
    WriteStatus,
    RotateCredentials,
    RotateAdminCredentials,
    BeginBackup,
    TakeBackup,
    FinishBackup,
    PruneBackups,
    ReapBackups,
    ArchiveWal,
    BeginRestoreTest,
    CheckRestoreTest,
    EndRestoreTest,
    LoadObject,
    WriteObjectStatus,
)
# The steps of the kinds declared on an instance (dbi.objects.KINDS).
OBJECT_STEPS: dict[str, ObjectAnatomy[Any, Any]] = {
    s.spec.name: s
    for s in (
        database.INSTANCE,
        database.CREATE,
        database.EXTENSIONS,
        database_release.RELEASE,
        role.INSTANCE,
        role.SECRET,
        role_create.CREATE,
        role_create.GRANTS,
        role_release.RELEASE,
    )
}


def step_activity(ctx: Context, step: Anatomy[Any, Any]) -> Callable[..., Any]:
    """Return the activity, named after the step, that runs ``step`` in the shared loop."""

    @activity.defn(name=step.spec.name)
    def run(step_input: StepInput) -> StepResult:
        return run_step(ctx, step, step_input)

    return run


def object_activity(ctx: Context, step: ObjectAnatomy[Any, Any]) -> Callable[..., Any]:
    """Return the activity, named after the step, that runs a DBDatabase's or DBRole's
    step."""

    @activity.defn(name=step.spec.name)
    def run(ref: ObjectRef) -> StepResult:
        return run_object_step(ctx, step, ref)

    return run


def all_activities(ctx: Context) -> list[Callable[..., Any]]:
    """Return every activity: each step of the table (in table order), the runner of a
    pass over them (``run_pass``, ``load_and_run_pass``), then the others."""
    steps = [STEPS[spec.name] for spec in (*pipeline.REPLICATED, *pipeline.TEARDOWN)]
    upgrades = Upgrades(ctx)
    activities = {s.spec.name: step_activity(ctx, s) for s in steps}
    return [
        *activities.values(),
        *runners(Passes(ctx, activities)),
        *(
            object_activity(ctx, OBJECT_STEPS[spec.name])
            for kind in KINDS.values()
            for spec in (*kind.steps, *kind.teardown)
        ),
        *(other(ctx).run for other in OTHERS),
        upgrades.begin,
        upgrades.run,
        upgrades.verify,
        upgrades.rollback,
        upgrades.finish,
    ]


def runners(passes: Passes) -> list[Callable[..., Any]]:
    """The activities that run a pass: ``run_pass`` and ``load_and_run_pass``."""
    return [passes.run_pass, passes.load_and_run_pass]
