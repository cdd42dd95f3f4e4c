"""A DBInstance's pass as its workflow runs it: planned by a pure function, run by one
runner (workflow code, no I/O).

``plan`` decides, from what the workflow knows before the load, what the pass is:
its id (its load and steps share it), whether it reads from the worker's views (an
idle pass: a health check nothing woke), whether its activities are local (all but a
forced resize's pass, an activity per step an operator watches), and the snapshot it
expects its load to find (the last pass's, or the one the wake showed): with one,
the load and the steps run in one local activity (``load_and_run_pass``).

``PassRunner`` runs it: ``load`` (with the steps when the load finds what the plan
expects), then, once rotations are served, ``steps``: in ``run_pass`` (one local
activity: the steps, then the status), or an activity per step (a forced resize's,
a restart's and the teardown's), then the status where the activity did not write
it. ``dbi.passes`` holds what the activities are given; the worker's side is
``activities.worker.passes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from dbi import pipeline
    from dbi.models import Served
    from dbi.passes import (
        LoadedPass,
        LoadedPassInput,
        PassInput,
        PendingStatus,
        StatusInput,
        finished,
    )
    from dbi.pipeline import StepSpec
    from dbi.status import PassReport
    from dbi.steps import InstanceSnapshot, StepInput, StepsResult
    from workflows import tracing, ui
    from workflows.runner import (
        call,
        go_on_after,
        in_one,
        in_one_timeout,
        run_pass,
        run_pass_in_one,
        steps_input,
    )
    from workflows.state import State

SHORT = timedelta(seconds=30)


@dataclass(frozen=True)
class Plan:
    """A pass before its load."""

    pass_id: str
    idle: bool  # its load and steps read from the worker's views
    local: bool  # its activities are local (False: an activity per step)
    expected: InstanceSnapshot | None  # load and run in one activity when found so


@dataclass(frozen=True)
class Begun:
    """A pass before its steps ran: the steps, their input, the status to write."""

    pipeline: tuple[StepSpec, ...]
    step_input: StepInput
    status: PendingStatus


# What ``load`` found, and the pass when its steps ran with the load.
Loaded = tuple[InstanceSnapshot, tuple[Begun, StepsResult] | None]


def converge(settings_step: bool, *, replicas: bool = False) -> tuple[StepSpec, ...]:
    """The converging pass's steps: without the settings step in a run begun before
    the patch SETTINGS_STEP (workflows.state), as 0.1.0 ran them; with the replicas
    step only for an instance that sets spec.instances (which no run before it saw, so
    a replay of any earlier run issues the same commands)."""
    steps = pipeline.REPLICATED if replicas else pipeline.CONVERGE
    return tuple(step for step in steps if settings_step or step is not pipeline.SETTINGS)


def plan(s: State, run_id: str) -> Plan:
    """The next pass of the workflow whose state is ``s``."""
    c = s.carried
    # A pass that serves a forced resize runs an activity per step: an operator's
    # request that may restart the VM, shown step by step.
    local = not s.requests.resize_waiters
    # A health check nothing woke reads from the worker's views: a change would have
    # woken it (and the watcher's wake may come before the views see the change, so a
    # woken pass reads afresh).
    idle = s.health_check and not (c.woken or c.retry)
    return Plan(
        pass_id=f"{run_id}/{c.passes}",
        idle=idle,
        local=local,
        expected=unchanged(s, idle=idle, local=local),
    )


def unchanged(s: State, *, idle: bool, local: bool) -> InstanceSnapshot | None:
    """The snapshot a pass expects its load to find: the last pass's, or what the wake
    that brought it showed (``State.seen``: the instance new, or of a generation newer
    than the last pass found), when that has nothing to serve (no request, deletion or
    pause), the workflow has no request waiting and, for a pass that reads afresh (a
    wake's, a hint's), no wake announced a newer generation; else None (the pass loads
    first, then decides)."""
    last, seen = s.last_snapshot, s.seen
    if seen is not None and (last is None or seen.generation > last.generation):
        last = seen
    if not (local and last is not None):
        return None
    if not idle and s.carried.signaled_generation > last.generation:
        return None
    return last if quiet(s, last) else None


def quiet(s: State, snapshot: InstanceSnapshot, rotated: Served | None = None) -> bool:
    """Whether a pass on ``snapshot`` has nothing to serve: no request, deletion or
    pause in it, no rotation served before it (``rotated``), no request waiting in the
    workflow. Such a pass may settle the instance (``activities.worker.rechecks``)."""
    busy = snapshot.deleting or snapshot.paused or s.requests.pending()
    served = rotated is None or rotated == Served()
    return snapshot.exists and not busy and served and snapshot.unserved == Served()


class PassRunner:
    """Runs the passes ``plan`` plans, on the workflow's state ``s``."""

    def __init__(self, s: State) -> None:
        self.s = s

    async def load(self, plan: Plan) -> Loaded:
        """Load the instance; with the pass's steps too when the plan expects a snapshot
        and the load finds it."""
        ran = await self._load_and_run(plan) if plan.expected is not None else None
        return ran if ran is not None else (await self._load(plan), None)

    async def steps(
        self,
        snapshot: InstanceSnapshot,
        plan: Plan,
        *,
        local: bool,
        rotated: Served,
        ran: tuple[Begun, StepsResult] | None = None,
    ) -> PassReport:
        """Run the pass's steps (``ran``: they ran with the load), write its status."""
        s = self.s
        s.waiting_for = ""
        begun = ran[0] if ran else self.begin(snapshot, plan, rotated=rotated)
        pipe, step_input = begun.pipeline, begun.step_input
        written = False
        if ran:
            results, written = await go_on_after(pipe, step_input, ran[1])
        elif local:
            # The activity that runs the steps writes the status too: one marker a pass.
            # A pass with nothing to serve that converges settles the instance there,
            # as an idle pass does: the worker re-checks it from then on.
            s.tally.activities(local=True)
            results, written, s.rechecked = await run_pass_in_one(
                pipe,
                step_input,
                status=begun.status,
                settle=snapshot if quiet(s, snapshot, rotated) else None,
            )
        else:
            results = await run_pass(pipe, step_input, local=False)
            s.tally.activities(len(results), local=False)
        pending = begun.status
        report = finished(pending.status.report, results, pending.requested, pending.rotated)
        s.carried.passes += 1
        s.tally.passed()
        s.last_report = report
        tracing.pass_span(report, f"{s.namespace}/{s.name}")
        if not (snapshot.deleting and report.converged) and not written:
            await self._write_status(pending.after(results), local=local)
        s.carried.summary = ui.publish(report, before=s.carried.summary)
        return report

    def begin(self, snapshot: InstanceSnapshot, plan: Plan, *, rotated: Served) -> Begun:
        """The pass on ``snapshot``: its steps, their input and the status to write."""
        s = self.s
        replicas = snapshot.instances is not None
        pipe = (
            pipeline.TEARDOWN if snapshot.deleting else converge(s.settings_step, replicas=replicas)
        )
        requested = snapshot.unserved
        paused = snapshot.paused and not snapshot.deleting
        step_input = StepInput(
            namespace=s.namespace,
            name=s.name,
            uid=snapshot.uid or "",
            allow_restart=bool(s.requests.resize_waiters or requested.restart_requested_at),
            paused=paused,
            pass_id=plan.pass_id,
            backup_requested=requested.backup_requested_at,
            switchover_requested=requested.switchover_requested_at,
            idle=plan.idle,
        )
        if s.generation_seen is None or s.generation_seen[0] != snapshot.generation:
            s.generation_seen = (snapshot.generation, workflow.now())
        report = PassReport(
            workflow_id=workflow.info().workflow_id,
            generation=snapshot.generation,
            power_state=snapshot.power_state,
            deleting=snapshot.deleting,
            pipeline=[step.reported for step in pipe],
            results=[],
            paused=paused,
        )
        status = StatusInput(
            namespace=s.namespace,
            name=s.name,
            uid=snapshot.uid or "",
            pass_id=plan.pass_id,
            report=report,
            generation_seen_at=s.generation_seen[1],
        )
        pending = PendingStatus(status=status, requested=requested, rotated=rotated)
        return Begun(pipeline=pipe, step_input=step_input, status=pending)

    def _load_input(self, plan: Plan) -> StepInput:
        s = self.s
        return StepInput(
            namespace=s.namespace,
            name=s.name,
            uid=s.carried.uid or "",
            pass_id=plan.pass_id,
            idle=plan.idle,
        )

    async def _load(self, plan: Plan) -> InstanceSnapshot:
        self.s.tally.activities(local=plan.local)
        snapshot: InstanceSnapshot = await call(
            pipeline.LOAD_INSTANCE,
            self._load_input(plan),
            local=plan.local,
            result_type=InstanceSnapshot,
            start_to_close_timeout=SHORT,
            summary="load the DBInstance",
        )
        return snapshot

    async def _load_and_run(self, plan: Plan) -> Loaded | None:
        """Load the instance and, when it is as expected, run the pass's steps and write
        its status, in one local activity; the snapshot, and the pass when it ran. An
        idle pass reads from the worker's views, a woken one afresh. None when the
        activity failed: the pass loads as any other does."""
        assert plan.expected is not None
        begun = self.begin(plan.expected, plan, rotated=Served())
        then = PassInput(steps=steps_input(begun.pipeline, begun.step_input), then=begun.status)
        self.s.tally.activities(local=True)
        loaded = await in_one(
            pipeline.LOAD_AND_RUN_PASS,
            LoadedPassInput(load=self._load_input(plan), expected=plan.expected, then=then),
            LoadedPass,
            timeout=SHORT + in_one_timeout(begun.pipeline),
            summary="load the DBInstance; unchanged: the steps, then the status",
            instead="loading first now",
        )
        if loaded is None:
            return None
        self.s.rechecked = loaded.rechecked
        return loaded.snapshot, (begun, loaded.done) if loaded.done is not None else None

    async def _write_status(self, status: StatusInput, *, local: bool) -> None:
        self.s.tally.activities(local=local)
        await call(
            pipeline.WRITE_STATUS,
            status,
            local=local,
            start_to_close_timeout=SHORT,
            summary="write status and Events",
        )
