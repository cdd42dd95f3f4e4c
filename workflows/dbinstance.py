"""DBInstanceWorkflow: one long-lived workflow converges one DBInstance.

Each iteration plans a pass (``workflows.passes.plan``), loads the instance, serves
queued update requests, runs the pass's steps (teardown's once the instance is being
deleted) and writes status (``workflows.passes.PassRunner``), then waits on a durable
timer or a signal (``workflows.waiting``). The workflow never fails because a step
did; it completes when its instance is gone, deleted, or replaced by one with another
UID.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

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
    from dbi.spec import PowerState
    from dbi.status import PassReport
    from dbi.steps import InstanceSnapshot
    from workflows import passes, tracing, ui
    from workflows.state import HISTORY_TALLY, SETTINGS_STEP, HistoryRead, State
    from workflows.waiting import Wait


@workflow.defn(name=names.WORKFLOW_TYPE)
class DBInstanceWorkflow:
    @workflow.init
    def __init__(self, input: WorkflowInput) -> None:
        self.input = input
        self.s = State.of(input)
        self.c = self.s.carried  # the part continue-as-new hands on
        self.passes = passes.PassRunner(self.s)

    @workflow.run
    async def run(self, input: WorkflowInput) -> str:
        ui.identify(self.s.namespace, self.s.name)
        # Every patch is asked here, before the first local activity (docs/engine.md).
        if workflow.patched(HISTORY_TALLY):
            self.s.tally.patched()
        else:
            self._read_history()
        self.s.settings_step = workflow.patched(SETTINGS_STEP)
        while True:
            # A pass a wake caused joins the watcher's trace: kubectl change to step.
            carrier, self.s.trace = self.s.trace, None
            with tracing.joined(carrier):
                plan = passes.plan(self.s, workflow.info().run_id)
                self.s.health_check = self.s.rechecked = False
                # A wake from here on is one this pass's load may not have seen: it
                # brings another pass (a deletion while rotations are served, say).
                self.c.woken = self.c.retry = False
                self.s.seen = None
                snapshot, ran = await self.passes.load(plan)
                if not snapshot.exists or (self.c.uid is not None and snapshot.uid != self.c.uid):
                    self.s.requests.refuse_all("the instance no longer exists")
                    return "the instance no longer exists"
                self._observed(snapshot)
                held = self._rotations_wait_for_ready(snapshot)
                rotated = Served() if held else await self._serve_rotation_requests(snapshot)
                await self._serve_rotations()
                # A restart requested by annotation may take longer than a local activity.
                restart = bool(snapshot.unserved.restart_requested_at)
                local = plan.local and not snapshot.deleting and not restart
                report = await self.passes.steps(
                    snapshot, plan, local=local, rotated=rotated, ran=ran
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

    async def _wait(self, wait: Wait, report: PassReport) -> None:
        self.s.waiting_for = wait.summary
        if wait.at_once:
            return  # no timer: the next pass starts now
        self.s.next_wakeup = workflow.now() + wait.timeout if wait.timeout else None

        def woken() -> bool:
            # A settle wake (a worker starting or stopping) asks for the pass of a wait
            # the worker took on: a settled instance's, or a transition's look
            # (``activities.worker.rechecks``), which a worker that died took with it.
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
