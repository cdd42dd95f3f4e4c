"""Every activity the worker hosts, bound to one Context.

A step's activity is registered under its name in the step table (``dbi.pipeline``),
running the step's anatomy in the shared loop (``activities.step.run``); the worker
fails to start if a step of the table has no module here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities import (
    access,
    admin,
    backup_schedule,
    credentials,
    health,
    monitoring,
    power,
    preflight,
    repave,
    resize,
    retention,
    teardown_backup,
    teardown_finalizer,
    teardown_monitoring,
    teardown_vm,
    tls,
    upgrade,
    vm,
)
from activities.backup import BeginBackup, FinishBackup, PruneBackups
from activities.basebackup import TakeBackup
from activities.instance import LoadInstance
from activities.kube import Stale, shared_reads
from activities.pgupgrade import Upgrades
from activities.postgres import shared_sessions
from activities.reaper import ReapBackups
from activities.rechecks import awaits, recheck, settled
from activities.rotation import RotateAdminCredentials, RotateCredentials
from activities.status import WriteStatus
from activities.step import Anatomy, Context
from activities.step import run as run_step
from activities.telemetry import measured
from dbi import pipeline
from dbi.messages import AWAIT_NET, RECHECK_NET
from dbi.passes import LoadedPass, LoadedPassInput, PassInput, loaded_pass, then_write
from dbi.status import StatusInput
from dbi.steps import InstanceSnapshot, StepInput, StepResult, StepsInput, StepsResult, in_order

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
    monitoring,
    backup_schedule,
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
)


def step_activity(ctx: Context, step: Anatomy[Any, Any]) -> Callable[..., Any]:
    """Return the activity, named after the step, that runs ``step`` in the shared loop."""

    @activity.defn(name=step.spec.name)
    def run(step_input: StepInput) -> StepResult:
        return run_step(ctx, step, step_input)

    return run


StepActivity = Callable[[StepInput], StepResult]


def pass_activity(
    steps: dict[str, StepActivity],
    write: Callable[[StatusInput], bool],
    settle: Settle | None = None,
) -> Callable[..., Any]:
    """Return the activity ``run_pass``: the steps (``run_steps``), then, when no step
    raised, the
    pass's status written with ``write`` (``WriteStatus.after_steps``); a pass given
    what its load found (``PassInput.settle``) that settled the instance is handed to
    ``settle`` as a re-check repeats it (``PassInput.rechecked``)."""

    @activity.defn(name=pipeline.RUN_PASS)
    def run(pass_input: PassInput) -> StepsResult:
        done = then_write(pass_input.then, run_steps(steps, pass_input.steps), write)
        if settle is None or (snapshot := pass_input.settle) is None:
            return done
        loaded = pass_input.rechecked(snapshot)
        if _settles(settle, loaded, LoadedPass(snapshot=snapshot, done=done)):
            return done.model_copy(update={"rechecked": True})
        return done

    return run


# Hand a pass to the worker's re-checks for this workflow id: every healthCheckInterval
# (None), or every so many seconds (a transition's fallback look); whether it took it.
Settle = Callable[[str, LoadedPassInput, float | None], bool]


def _settles(settle: Settle | None, loaded: LoadedPassInput, ran: LoadedPass) -> bool:
    """Whether ``settle`` took on the pass ``ran`` for this activity's workflow: one that
    settled the instance, or one that waits on a transition the watcher announces, whose
    fallback look the worker makes (``activities.rechecks``)."""
    if settle is None:
        return False
    workflow_id = activity.info().workflow_id or ""
    if settled(loaded, ran):
        return settle(workflow_id, loaded, None)
    every = awaits(loaded, ran)
    return every is not None and settle(workflow_id, loaded, every)


def loaded_pass_activity(
    load: Callable[[StepInput], InstanceSnapshot],
    run_pass: Callable[[PassInput], StepsResult],
    settle: Settle | None = None,
) -> Callable[..., Any]:
    """Return the activity ``load_and_run_pass``: a pass's load (``load``), then
    ``run_pass`` when the instance is as the workflow expects (``dbi.passes.loaded_pass``);
    a pass that settled the instance is handed to ``settle`` as an idle pass's re-check
    (``activities.rechecks``), a woken pass's too."""

    @activity.defn(name=pipeline.LOAD_AND_RUN_PASS)
    def run(loaded: LoadedPassInput) -> LoadedPass:
        ran = loaded_pass(loaded, load, run_pass)
        if _settles(settle, loaded.rechecked(), ran):
            return ran.model_copy(update={"rechecked": True})
        return ran

    return run


def runners(ctx: Context, steps: dict[str, StepActivity]) -> list[Callable[..., Any]]:
    """The activities that run a pass's ``steps`` in one go: ``run_pass`` (and its
    status write) and ``load_and_run_pass`` (and its load, and the worker's re-checks
    of the instances it settles)."""
    status = WriteStatus(ctx)
    load = LoadInstance(ctx).run
    settle = None
    if (rechecks := ctx.rechecks) is not None:

        def check(loaded: LoadedPassInput) -> str | None:
            return recheck(loaded, load, steps, status.unchanged, ctx.passes.forget)

        def settle(workflow_id: str, loaded: LoadedPassInput, every: float | None) -> bool:
            net = RECHECK_NET if every is None else AWAIT_NET
            return rechecks.settle(workflow_id, loaded, check, net.total_seconds(), every)

    run_pass = pass_activity(steps, status.after_steps, settle)
    return [run_pass, loaded_pass_activity(load, run_pass, settle)]


def run_steps(steps: dict[str, StepActivity], steps_input: StepsInput) -> StepsResult:
    """Run the pass's steps one after the other, each as its function in ``steps`` (by
    name) runs it, while the pass goes on, sharing what they read
    (``activities.kube.shared_reads``); in an activity (``run_pass``).

    An idle pass reads from the worker's views; when one of its steps would act, the
    pass runs again, every read fresh, before anything is written (``Stale``)."""
    each = measured(lambda step, one: steps[step](one))
    if steps_input.step_input.idle:
        try:
            with shared_reads(idle=True), shared_sessions():
                return in_order(steps_input, each)
        except Stale:
            activity.logger.info("an idle pass would act: running it on fresh reads")
    with shared_reads(), shared_sessions():
        return in_order(steps_input, each)


def all_activities(ctx: Context) -> list[Callable[..., Any]]:
    """Return every activity: each step of the table (in table order), the runners over
    them (``run_pass``, ``load_and_run_pass``), then the others."""
    steps = [STEPS[spec.name] for spec in (*pipeline.CONVERGE, *pipeline.TEARDOWN)]
    upgrades = Upgrades(ctx)
    activities = {s.spec.name: step_activity(ctx, s) for s in steps}
    return [
        *activities.values(),
        *runners(ctx, activities),
        *(other(ctx).run for other in OTHERS),
        upgrades.begin,
        upgrades.run,
        upgrades.verify,
        upgrades.rollback,
        upgrades.finish,
    ]
