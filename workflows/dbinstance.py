"""DBInstanceWorkflow: one long-lived workflow converges one DBInstance.

Each iteration loads the instance, serves queued update requests, runs one pass of
the pipeline (teardown once the instance is being deleted), writes status, and
waits on a durable timer or a signal. A pass runs its activities as local activities
(one workflow task, not a round trip through the server per step), its steps in one of
them, but for a pass that serves a forced resize or a restart and the teardown's steps,
which run an activity per step. The workflow never fails because a
step did; it completes when its instance is gone, deleted, or replaced by one with
another UID.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from dbi import names
    from dbi import pipeline as steps
    from dbi.messages import (
        RUN_EVENTS,
        TASK_TIMEOUT,
        Progress,
        ResizeResult,
        RotationResult,
        Wake,
        WorkflowInput,
    )
    from dbi.models import Served
    from dbi.passes import LoadedPass, LoadedPassInput, PassInput, PendingStatus
    from dbi.pipeline import StepSpec
    from dbi.spec import PowerState
    from dbi.status import PassReport, StatusInput, finished
    from dbi.steps import InstanceSnapshot, StepInput, StepsResult
    from workflows import tracing, ui
    from workflows.runner import (
        IN_ONE,
        call,
        go_on_after,
        in_one_timeout,
        run_pass,
        run_pass_in_one,
        steps_input,
    )
    from workflows.state import HISTORY_TALLY, HistoryRead, State
    from workflows.waiting import Wait

SHORT = timedelta(seconds=30)


@dataclass(frozen=True)
class Begun:
    """A pass before its steps ran: the steps, their input, the status to write."""

    pipeline: tuple[StepSpec, ...]
    step_input: StepInput
    status: PendingStatus


@workflow.defn(name=names.WORKFLOW_TYPE)
class DBInstanceWorkflow:
    @workflow.init
    def __init__(self, input: WorkflowInput) -> None:
        self.input = input
        self.s = State.of(input)
        self.c = self.s.carried  # the part continue-as-new hands on

    @workflow.run
    async def run(self, input: WorkflowInput) -> str:
        ui.identify(self.s.namespace, self.s.name)
        # Every patch is asked here, before the first local activity (docs/engine.md).
        if workflow.patched(HISTORY_TALLY):
            self.s.tally.patched()
        else:
            self._read_history()
        while True:
            # A pass a wake caused joins the watcher's trace: kubectl change to step.
            carrier, self.s.trace = self.s.trace, None
            with tracing.joined(carrier):
                # A pass that serves a forced resize runs an activity per step: an
                # operator's request that may restart the VM, shown step by step.
                local = not self.s.requests.resize_waiters
                # A health check nothing woke reads from the worker's views: a change
                # would have woken it (and the watcher's wake may come before the views
                # see the change, so a woken pass reads afresh).
                idle = self.s.health_check and not (self.c.woken or self.c.retry)
                self.s.health_check = self.s.rechecked = False
                # A wake from here on is one this pass's load may not have seen: it
                # brings another pass (a deletion while rotations are served, say).
                self.c.woken = self.c.retry = False
                # The pass's load and steps share an id: the steps start from its read.
                pass_id = f"{workflow.info().run_id}/{self.c.passes}"
                # A pass may expect the instance as the last pass found it, or as the
                # wake that brought it showed it: one local activity loads it and, when
                # so, runs the pass too.
                seen, self.s.seen = self.s.seen, None
                expected = self._unchanged(idle=idle, local=local, seen=seen)
                ran = None
                if expected is not None:
                    ran = await self._load_and_run(pass_id, expected, idle=idle)
                snapshot = ran[0] if ran else await self._load(pass_id, local=local, idle=idle)
                if not snapshot.exists or (self.c.uid is not None and snapshot.uid != self.c.uid):
                    self.s.requests.refuse_all("the instance no longer exists")
                    return "the instance no longer exists"
                self._observed(snapshot)
                held = self._rotations_wait_for_ready(snapshot)
                rotated = Served() if held else await self._serve_rotation_requests(snapshot)
                await self._serve_rotations()
                # A restart requested by annotation may take longer than a local activity.
                restart = bool(snapshot.unserved.restart_requested_at)
                local = local and not snapshot.deleting and not restart
                report = await self._pass(
                    snapshot,
                    pass_id,
                    local=local,
                    rotated=rotated,
                    idle=idle,
                    ran=ran[1] if ran else None,
                )
                if snapshot.deleting and report.converged:
                    return "deleted"
                self.s.requests.answer_resize_waiters(report)
                wait, self.s.streaks = self.s.streaks.after(
                    report,
                    snapshot,
                    spread=workflow.random().random(),
                    settled=self.s.rechecked,
                )
                if held and report.blocking is None:
                    wait = Wait(timedelta(0), "ready: now the requested rotation", True)
                if self._should_continue_as_new():
                    await self._continue_as_new()
            await self._wait(wait, report)

    # Messages -------------------------------------------------------------------

    @workflow.signal(name=names.WAKE)
    def wake(self, signal: Wake) -> None:
        if signal.settle:  # nothing changed: the health check's pass, now
            self.s.settle = True
            return
        self.c.woken = True
        if signal.seen is not None:
            self.s.seen = signal.seen.expected()
        # A deletion ends every wait, a Terminal one too: the next pass finds the
        # instance gone and the workflow completes (no workflow outlives its instance).
        # So does a change of the instance's dbi.dev/ annotations (a decision such as
        # dbi.dev/adopt), as the retry signal does.
        self.c.retry = self.c.retry or signal.gone or signal.retry
        self.s.trace = signal.trace or self.s.trace
        if signal.generation is not None:
            self.c.signaled_generation = max(self.c.signaled_generation, signal.generation)

    @workflow.signal(name=names.RETRY)
    def retry(self) -> None:
        self.c.retry = True

    @workflow.update(name=names.ROTATE_CREDENTIALS)
    async def rotate_credentials(self) -> RotationResult:
        request_id = self.s.requests.queue_rotation(steps.ROTATE_CREDENTIALS)
        result: RotationResult = await self.s.requests.answer(request_id)
        return result

    @rotate_credentials.validator
    def _validate_rotate(self) -> None:
        self._refuse_while_deleting()
        self._refuse_while_stopped("start it to rotate its password")

    @workflow.update(name=names.ROTATE_ADMIN_CREDENTIALS)
    async def rotate_admin_credentials(self) -> RotationResult:
        request_id = self.s.requests.queue_rotation(steps.ROTATE_ADMIN_CREDENTIALS)
        result: RotationResult = await self.s.requests.answer(request_id)
        return result

    @rotate_admin_credentials.validator
    def _validate_rotate_admin(self) -> None:
        self._validate_rotate()

    @workflow.update(name=names.FORCE_RESIZE)
    async def force_resize(self) -> ResizeResult:
        request_id = self.s.requests.queue_resize()
        self.c.woken = True
        result: ResizeResult = await self.s.requests.answer(request_id)
        return result

    @force_resize.validator
    def _validate_resize(self) -> None:
        self._refuse_while_deleting()
        self._refuse_while_stopped("it takes its new size when it starts")

    @workflow.query(name=names.PROGRESS)
    def progress(self) -> Progress:
        return ui.progress(self.s)

    def _refuse_while_deleting(self) -> None:
        if self.s.deleting:
            raise ValueError(f"{self.s.namespace}/{self.s.name} is being deleted")

    def _refuse_while_stopped(self, instead: str) -> None:
        if self.s.power_state is PowerState.STOPPED:
            raise ValueError(f"{self.s.namespace}/{self.s.name} is stopped; {instead}")

    # Phases of an iteration -----------------------------------------------------

    def _observed(self, snapshot: InstanceSnapshot) -> None:
        """Remember what the load saw; a deletion refuses every queued request."""
        self.s.last_snapshot = snapshot
        self.c.uid = snapshot.uid
        self.s.deleting = snapshot.deleting
        self.s.power_state = snapshot.power_state
        if snapshot.deleting:
            self.s.requests.refuse_all("the instance is being deleted")

    async def _load(self, pass_id: str, *, local: bool, idle: bool) -> InstanceSnapshot:
        self.s.tally.activities(local=local)
        snapshot: InstanceSnapshot = await call(
            steps.LOAD_INSTANCE,
            self._load_input(pass_id, idle=idle),
            local=local,
            result_type=InstanceSnapshot,
            start_to_close_timeout=SHORT,
            summary="load the DBInstance",
        )
        return snapshot

    def _load_input(self, pass_id: str, *, idle: bool) -> StepInput:
        return StepInput(
            namespace=self.s.namespace,
            name=self.s.name,
            uid=self.c.uid or "",
            pass_id=pass_id,
            idle=idle,
        )

    def _unchanged(
        self, *, idle: bool, local: bool, seen: InstanceSnapshot | None = None
    ) -> InstanceSnapshot | None:
        """The snapshot a pass expects its load to find: the last pass's, or what the
        wake that brought it showed (``seen``: the instance new, or of a generation newer
        than the last pass found), when that has nothing to serve (no request, deletion
        or pause), the workflow has no request waiting and, for a pass that reads afresh
        (a wake's, a hint's), no wake announced a newer generation; else None (the pass
        loads first, then decides)."""
        last = self.s.last_snapshot
        if seen is not None and (last is None or seen.generation > last.generation):
            last = seen
        if not (local and last is not None):
            return None
        if not idle and self.c.signaled_generation > last.generation:
            return None
        return last if self._quiet(last) else None

    def _quiet(self, snapshot: InstanceSnapshot, rotated: Served | None = None) -> bool:
        """Whether a pass on ``snapshot`` has nothing to serve: no request, deletion or
        pause in it, no rotation served before it (``rotated``), no request waiting in
        the workflow. Such a pass may settle the instance (``activities.rechecks``)."""
        busy = snapshot.deleting or snapshot.paused or self.s.requests.pending()
        served = rotated is None or rotated == Served()
        return snapshot.exists and not busy and served and snapshot.unserved == Served()

    async def _load_and_run(
        self, pass_id: str, expected: InstanceSnapshot, *, idle: bool
    ) -> tuple[InstanceSnapshot, tuple[Begun, StepsResult] | None] | None:
        """Load the instance and, when it is as ``expected``, run the pass's steps and
        write its status, in one local activity; the snapshot, and the pass when it ran.
        An ``idle`` pass reads from the worker's views, a woken one afresh. None when the
        activity failed: the pass loads as any other does."""
        begun = self._begin(expected, pass_id, rotated=Served(), idle=idle)
        load = self._load_input(pass_id, idle=idle)
        then = PassInput(steps=steps_input(begun.pipeline, begun.step_input), then=begun.status)
        self.s.tally.activities(local=True)
        try:
            loaded: LoadedPass = await workflow.execute_local_activity(
                steps.LOAD_AND_RUN_PASS,
                LoadedPassInput(load=load, expected=expected, then=then),
                result_type=LoadedPass,
                start_to_close_timeout=SHORT + in_one_timeout(begun.pipeline),
                retry_policy=IN_ONE,
                summary="load the DBInstance; unchanged: the steps, then the status",
            )
        except FailureError as e:
            if isinstance(e, CancelledError):
                raise
            workflow.logger.warning("the pass failed in one activity; loading first now")
            return None
        self.s.rechecked = loaded.rechecked
        return loaded.snapshot, (begun, loaded.done) if loaded.done is not None else None

    async def _serve_rotations(self) -> None:
        requests = self.s.requests
        ran = await requests.serve_rotations(self.s.namespace, self.s.name, self.c.uid or "")
        self.s.tally.rotations(ran)

    def _rotations_wait_for_ready(self, snapshot: InstanceSnapshot) -> bool:
        """Whether the rotations annotations ask for wait for a pass that finds the
        instance Ready: a new instance's (applied with its annotation) has no password
        to rotate yet, and trying would only fail."""
        asked = snapshot.unserved.rotate_requested_at or snapshot.unserved.rotate_admin_requested_at
        ready = self.s.last_report is not None and self.s.last_report.converged
        return bool(asked) and not ready

    async def _serve_rotation_requests(self, snapshot: InstanceSnapshot) -> Served:
        """Carry out the rotations unserved dbi.dev/rotate-*requested-at annotations ask
        for (a stopped or paused instance's once it runs); return those carried out."""
        held = snapshot.deleting or snapshot.paused
        if held or snapshot.power_state is PowerState.STOPPED:
            return Served()
        queued = self.s.requests.queue_requested_rotations(snapshot.unserved)
        if queued:
            await self._serve_rotations()
        return self.s.requests.collect_requested_rotations(queued)

    async def _pass(
        self,
        snapshot: InstanceSnapshot,
        pass_id: str,
        *,
        local: bool,
        rotated: Served,
        idle: bool,
        ran: tuple[Begun, StepsResult] | None = None,
    ) -> PassReport:
        """Run the pass's steps (``ran``: they ran with the load), write its status."""
        self.s.waiting_for = ""
        begun = ran[0] if ran else self._begin(snapshot, pass_id, rotated=rotated, idle=idle)
        pipeline, step_input = begun.pipeline, begun.step_input
        written = False
        if ran:
            results, written = await go_on_after(pipeline, step_input, ran[1])
        elif local:
            # The activity that runs the steps writes the status too: one marker a pass.
            # A pass with nothing to serve that converges settles the instance there,
            # as an idle pass does: the worker re-checks it from then on.
            self.s.tally.activities(local=True)
            results, written, self.s.rechecked = await run_pass_in_one(
                pipeline,
                step_input,
                status=begun.status,
                settle=snapshot if self._quiet(snapshot, rotated) else None,
            )
        else:
            results = await run_pass(pipeline, step_input, local=False)
            self.s.tally.activities(len(results), local=False)
        pending = begun.status
        report = finished(pending.status.report, results, pending.requested, pending.rotated)
        self.c.passes += 1
        self.s.tally.passed()
        self.s.last_report = report
        tracing.pass_span(report, f"{self.s.namespace}/{self.s.name}")
        if not (snapshot.deleting and report.converged) and not written:
            await self._write_status(pending.after(results), local=local)
        self.c.summary = ui.publish(report, before=self.c.summary)
        return report

    def _begin(
        self, snapshot: InstanceSnapshot, pass_id: str, *, rotated: Served, idle: bool
    ) -> Begun:
        """The pass on ``snapshot``: its steps, their input and the status to write."""
        pipeline = steps.TEARDOWN if snapshot.deleting else steps.CONVERGE
        requested = snapshot.unserved
        paused = snapshot.paused and not snapshot.deleting
        step_input = StepInput(
            namespace=self.s.namespace,
            name=self.s.name,
            uid=snapshot.uid or "",
            allow_restart=bool(self.s.requests.resize_waiters or requested.restart_requested_at),
            paused=paused,
            pass_id=pass_id,
            backup_requested=requested.backup_requested_at,
            idle=idle,
        )
        if self.s.generation_seen is None or self.s.generation_seen[0] != snapshot.generation:
            self.s.generation_seen = (snapshot.generation, workflow.now())
        report = PassReport(
            workflow_id=workflow.info().workflow_id,
            generation=snapshot.generation,
            power_state=snapshot.power_state,
            deleting=snapshot.deleting,
            pipeline=[s.reported for s in pipeline],
            results=[],
            paused=paused,
        )
        status = StatusInput(
            namespace=self.s.namespace,
            name=self.s.name,
            uid=snapshot.uid or "",
            pass_id=pass_id,
            report=report,
            generation_seen_at=self.s.generation_seen[1],
        )
        pending = PendingStatus(status=status, requested=requested, rotated=rotated)
        return Begun(pipeline=pipeline, step_input=step_input, status=pending)

    async def _write_status(self, status: StatusInput, *, local: bool) -> None:
        self.s.tally.activities(local=local)
        await call(
            steps.WRITE_STATUS,
            status,
            local=local,
            start_to_close_timeout=SHORT,
            summary="write status and Events",
        )

    async def _wait(self, wait: Wait, report: PassReport) -> None:
        self.s.waiting_for = wait.summary
        if wait.at_once:
            return  # no timer: the next pass starts now
        self.s.next_wakeup = workflow.now() + wait.timeout if wait.timeout else None

        def woken() -> bool:
            # A settle wake (a worker starting or stopping) asks for the pass of a wait
            # the worker took on: a settled instance's, or a transition's look
            # (``activities.rechecks``), which a worker that died took with it.
            settle = self.s.settle and (report.converged or self.s.rechecked)
            return self.c.woken or self.s.requests.pending() or settle

        def changed() -> bool:
            newer = self.c.signaled_generation > report.generation
            return self.c.retry or newer or self.s.requests.pending()

        done = woken if wait.wake_on_any_signal else changed
        try:
            await workflow.wait_condition(done, timeout=wait.timeout, timeout_summary=wait.summary)
        except TimeoutError:
            # Nothing woke a Ready instance: the next pass is a health check.
            self.s.health_check = report.converged and not report.deleting
            if self.s.history_read is not None:  # a run begun before HISTORY_TALLY
                self._read_history()
        else:
            # A started worker's settle wake alone is a health check's too.
            other = self.c.woken or self.c.retry or self.s.requests.pending()
            ready = report.converged and not report.deleting
            self.s.health_check = self.s.settle and not other and ready
        self.s.settle = False
        self.s.next_wakeup = None

    # Lifetime -------------------------------------------------------------------

    def _read_history(self) -> None:
        """A run begun before HISTORY_TALLY reads its history at its start and where a
        timer ended a wait (0.1.0's rule, see ``workflows.state.Tally``)."""
        self.s.history_read = HistoryRead.now(passes=self.c.passes)

    def _should_continue_as_new(self) -> bool:
        """The run's history holds ``history_limit`` events, as counted (or as read, by
        a run begun before HISTORY_TALLY), and no forced resize waits for a pass."""
        too_long = self.s.too_long(self.input.history_limit)
        return too_long and not self.s.requests.resize_waiters

    async def _continue_as_new(self) -> None:
        """Hand the small state to a new run once every request has been answered.

        Rotations that arrive meanwhile are served first; a forced resize needs a pass,
        so its arrival postpones continue-as-new to a later iteration.
        """
        requests = self.s.requests
        while not requests.resize_waiters:
            await self._serve_rotations()
            await workflow.wait_condition(
                lambda: workflow.all_handlers_finished() or requests.pending()
            )
            if workflow.all_handlers_finished() and not requests.rotations:
                workflow.continue_as_new(
                    WorkflowInput(
                        namespace=self.s.namespace,
                        name=self.s.name,
                        # A run begun with a higher limit hands RUN_EVENTS on.
                        history_limit=min(self.input.history_limit, RUN_EVENTS),
                        carried=self.s.handed_on(),
                    ),
                    task_timeout=TASK_TIMEOUT,  # as the watcher started it
                )
