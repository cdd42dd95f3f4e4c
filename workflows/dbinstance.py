"""DBInstanceWorkflow: one long-lived workflow converges one DBInstance.

Each iteration loads the instance, serves queued update requests, runs one pass of
the pipeline (teardown once the instance is being deleted), writes status, and
waits on a durable timer or a signal. A pass runs its activities as local activities
(one workflow task, not a round trip through the server per step), but for a pass that
serves a forced resize and the teardown's steps. The workflow never fails because a
step did; it completes when its instance is gone, deleted, or replaced by one with
another UID.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from dbi import names
    from dbi import pipeline as steps
    from dbi.messages import (
        FORCE_RESIZE,
        PROGRESS,
        RETRY,
        ROTATE_ADMIN_CREDENTIALS,
        ROTATE_CREDENTIALS,
        TASK_TIMEOUT,
        WAKE,
        Carried,
        Progress,
        ResizeResult,
        RotationRequest,
        RotationResult,
        StepProgress,
        Wake,
        WorkflowInput,
    )
    from dbi.models import PowerState
    from dbi.status import PassReport, StatusInput, Summary, summarize
    from dbi.steps import InstanceSnapshot, Outcome, StepInput
    from workflows import tracing, ui
    from workflows.pipeline import call, run_pass
    from workflows.waiting import PendingStreak, Wait, next_wait

SHORT = timedelta(seconds=30)
# The patches that made passes run their activities as local activities: health
# checks, then every other pass on a Ready instance, then every pass.
LOCAL_HEALTH_CHECKS = "local-health-checks"
LOCAL_READY_PASSES = "local-ready-passes"
LOCAL_PASSES = "local-passes"
# The steps that joined the pipeline under a patch, each with its patch: a workflow that
# began before one runs, and replays, without it.
RETENTION_STEP = "retention-step"
ADMIN_STEP = "admin-step"
PATCHED_STEPS = (("retention", RETENTION_STEP), ("admin", ADMIN_STEP))
# A rotation that keeps failing (the database unreachable, say) is answered after so
# many attempts, and the instance's passes go on.
ROTATION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)
ROTATION_SUMMARY = {
    steps.ROTATE_CREDENTIALS: "rotate the app password (update)",
    steps.ROTATE_ADMIN_CREDENTIALS: "rotate dbi's admin password (update)",
}
# A rotation's own refusals: their message is the answer the caller gets.
ROTATION_REFUSALS = frozenset({"NotRunning", "InstanceGone", "AdminNotReady"})


@dataclass
class State:
    """Everything the workflow remembers; ``carried()`` is what survives continue-as-new."""

    namespace: str
    name: str
    uid: str | None = None
    woken: bool = False
    retry: bool = False
    signaled_generation: int = 0
    transient_streak: int = 0
    at_once_streak: int = 0  # passes in a row followed by no wait (not carried)
    # Passes in a row Pending at the same step for the same reason (not carried).
    pending: PendingStreak = field(default_factory=PendingStreak)
    # The wait that just ended was a Ready instance's health-check timer (not carried).
    health_check: bool = False
    passes: int = 0
    deleting: bool = False
    # What the last pass's load saw of spec.powerState (None: no pass yet in this run).
    power_state: PowerState | None = None
    summary: Summary | None = None
    last_report: PassReport | None = None
    waiting_for: str = "the first pass"
    next_wakeup: datetime | None = None
    # Queued rotations: (update id, the activity that serves it).
    rotations: deque[tuple[str, str]] = field(default_factory=deque)
    rotated: dict[str, RotationResult] = field(default_factory=dict)
    resize_waiters: list[str] = field(default_factory=list)
    resized: dict[str, ResizeResult] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    # Not carried: the trace of the wake that caused the next pass, and when a pass
    # first saw the current generation.
    trace: dict[str, str] | None = None
    generation_seen: tuple[int, datetime] | None = None

    def carried(self) -> Carried:
        return Carried(**{name: getattr(self, name) for name in Carried.model_fields})


@workflow.defn(name=names.WORKFLOW_TYPE)
class DBInstanceWorkflow:
    @workflow.init
    def __init__(self, input: WorkflowInput) -> None:
        self.input = input
        carried = input.carried or Carried()
        # Carried's fields are State's own, under the same names.
        self.s = State(namespace=input.namespace, name=input.name, **dict(carried))

    @workflow.run
    async def run(self, input: WorkflowInput) -> str:
        self._identify()
        while True:
            # A pass a wake caused joins the watcher's trace: kubectl change to step.
            carrier, self.s.trace = self.s.trace, None
            with tracing.joined(carrier):
                local = self._local_pass()
                self.s.health_check = False
                # The pass's load and steps share an id: the steps start from its read.
                pass_id = f"{workflow.info().run_id}/{self.s.passes}"
                snapshot = await self._load(pass_id, local=local)
                if not snapshot.exists or (self.s.uid is not None and snapshot.uid != self.s.uid):
                    self._refuse_all("the instance no longer exists")
                    return "the instance no longer exists"
                self.s.uid = snapshot.uid
                self.s.deleting = snapshot.deleting
                self.s.power_state = snapshot.power_state
                if snapshot.deleting:
                    self._refuse_all("the instance is being deleted")
                await self._serve_rotations()
                report = await self._pass(snapshot, pass_id, local=local and not snapshot.deleting)
                if snapshot.deleting and report.converged:
                    return "deleted"
                self._answer_resize_waiters(report)
                self.s.pending = self.s.pending.after(report)
                wait = next_wait(
                    report,
                    snapshot,
                    transient_streak=self.s.transient_streak,
                    at_once_streak=self.s.at_once_streak,
                    pending_streak=self.s.pending.count,
                    spread=workflow.random().random(),
                )
                self.s.at_once_streak = self.s.at_once_streak + 1 if wait.at_once else 0
                if self._should_continue_as_new():
                    await self._continue_as_new()
            await self._wait(wait, report)

    # Messages -------------------------------------------------------------------

    @workflow.signal(name=WAKE)
    def wake(self, signal: Wake) -> None:
        self.s.woken = True
        # A deletion ends every wait, a Terminal one too: the next pass finds the
        # instance gone and the workflow completes (no workflow outlives its instance).
        # So does a change of the instance's dbi.dev/ annotations (a decision such as
        # dbi.dev/adopt), as the retry signal does.
        self.s.retry = self.s.retry or signal.gone or signal.retry
        self.s.trace = signal.trace or self.s.trace
        if signal.generation is not None:
            self.s.signaled_generation = max(self.s.signaled_generation, signal.generation)

    @workflow.signal(name=RETRY)
    def retry(self) -> None:
        self.s.retry = True

    @workflow.update(name=ROTATE_CREDENTIALS)
    async def rotate_credentials(self) -> RotationResult:
        return await self._rotation(steps.ROTATE_CREDENTIALS)

    @rotate_credentials.validator
    def _validate_rotate(self) -> None:
        self._refuse_while_deleting()
        self._refuse_while_stopped("start it to rotate its password")

    @workflow.update(name=ROTATE_ADMIN_CREDENTIALS)
    async def rotate_admin_credentials(self) -> RotationResult:
        return await self._rotation(steps.ROTATE_ADMIN_CREDENTIALS)

    @rotate_admin_credentials.validator
    def _validate_rotate_admin(self) -> None:
        self._validate_rotate()

    @workflow.update(name=FORCE_RESIZE)
    async def force_resize(self) -> ResizeResult:
        request_id = _update_id()
        self.s.resize_waiters.append(request_id)
        self.s.woken = True
        await workflow.wait_condition(
            lambda: request_id in self.s.resized or request_id in self.s.refused
        )
        if request_id in self.s.refused:
            self._refuse(request_id)
        return self.s.resized.pop(request_id)

    @force_resize.validator
    def _validate_resize(self) -> None:
        self._refuse_while_deleting()
        self._refuse_while_stopped("it takes its new size when it starts")

    async def _rotation(self, activity: str) -> RotationResult:
        """Queue a rotation served by ``activity``; return its result once served."""
        request_id = _update_id()
        self.s.rotations.append((request_id, activity))
        await workflow.wait_condition(
            lambda: request_id in self.s.rotated or request_id in self.s.refused
        )
        if request_id in self.s.refused:
            self._refuse(request_id)
        return self.s.rotated.pop(request_id)

    @workflow.query(name=PROGRESS)
    def progress(self) -> Progress:
        last = self.s.last_report.results if self.s.last_report else []
        return Progress(
            namespace=self.s.namespace,
            name=self.s.name,
            passes=self.s.passes,
            generation=self.s.last_report.generation if self.s.last_report else None,
            summary=self.s.summary,
            last_pass=[
                StepProgress(step=r.step, outcome=r.outcome, reason=r.reason, message=r.message)
                for r in last
            ],
            waiting_for=self.s.waiting_for or "a pass is running",
            next_wakeup=self.s.next_wakeup,
            queued_requests=len(self.s.rotations) + len(self.s.resize_waiters),
        )

    def _refuse_while_deleting(self) -> None:
        if self.s.deleting:
            raise ValueError(f"{self.s.namespace}/{self.s.name} is being deleted")

    def _refuse_while_stopped(self, instead: str) -> None:
        if self.s.power_state is PowerState.STOPPED:
            raise ValueError(f"{self.s.namespace}/{self.s.name} is stopped; {instead}")

    def _refuse(self, request_id: str) -> NoReturn:
        raise ApplicationError(self.s.refused.pop(request_id), type="Refused", non_retryable=True)

    def _refuse_all(self, why: str) -> None:
        for request_id in [*(r for r, _ in self.s.rotations), *self.s.resize_waiters]:
            self.s.refused[request_id] = why
        self.s.rotations.clear()
        self.s.resize_waiters.clear()

    # Phases of an iteration -----------------------------------------------------

    def _identify(self) -> None:
        """Set DbiNamespace and DbiName if the starter did not."""
        current = workflow.info().typed_search_attributes
        if current.get(names.NAME_ATTRIBUTE) is None:
            workflow.upsert_search_attributes(
                [
                    names.NAMESPACE_ATTRIBUTE.value_set(self.s.namespace),
                    names.NAME_ATTRIBUTE.value_set(self.s.name),
                ]
            )

    def _local_pass(self) -> bool:
        """Whether the next pass runs its activities as local activities: every pass
        does but one that serves a forced resize (an operator's request that may restart
        the VM, shown step by step as activities). Each kind of pass became local under
        a patch of its own, so histories from before each replay as they ran."""
        if self.s.resize_waiters:
            return False
        if self.s.health_check:
            return workflow.patched(LOCAL_HEALTH_CHECKS)
        last = self.s.last_report
        if last is not None and last.converged and not last.deleting:
            return workflow.patched(LOCAL_READY_PASSES)
        return workflow.patched(LOCAL_PASSES)

    async def _load(self, pass_id: str, *, local: bool) -> InstanceSnapshot:
        snapshot: InstanceSnapshot = await call(
            steps.LOAD_INSTANCE,
            StepInput(
                namespace=self.s.namespace,
                name=self.s.name,
                uid=self.s.uid or "",
                pass_id=pass_id,
            ),
            local=local,
            result_type=InstanceSnapshot,
            start_to_close_timeout=SHORT,
            summary="load the DBInstance",
        )
        return snapshot

    async def _serve_rotations(self) -> None:
        """Carry out queued rotations one at a time, between passes. One that fails (after
        ROTATION_RETRY's attempts) is answered with why, and the passes go on: an update
        never fails the workflow."""
        while self.s.rotations:
            request_id, rotation = self.s.rotations[0]
            try:
                result = await workflow.execute_activity(
                    rotation,
                    RotationRequest(
                        namespace=self.s.namespace,
                        name=self.s.name,
                        uid=self.s.uid or "",
                        request_id=request_id,
                    ),
                    result_type=RotationResult,
                    start_to_close_timeout=SHORT,
                    retry_policy=ROTATION_RETRY,
                    summary=ROTATION_SUMMARY[rotation],
                )
            except ActivityError as e:
                workflow.logger.warning("rotation %s failed", request_id)
                self.s.rotations.popleft()
                self.s.refused[request_id] = _rotation_failure(e)
                continue
            self.s.rotations.popleft()
            self.s.rotated[request_id] = result

    def _pipeline(self, snapshot: InstanceSnapshot) -> tuple[steps.StepSpec, ...]:
        if snapshot.deleting:
            return steps.TEARDOWN
        absent = {step for step, patch in PATCHED_STEPS if not workflow.patched(patch)}
        return tuple(s for s in steps.CONVERGE if s.name not in absent)

    async def _pass(self, snapshot: InstanceSnapshot, pass_id: str, *, local: bool) -> PassReport:
        pipeline = self._pipeline(snapshot)
        self.s.woken = self.s.retry = False
        self.s.waiting_for = ""
        step_input = StepInput(
            namespace=self.s.namespace,
            name=self.s.name,
            uid=snapshot.uid or "",
            allow_restart=bool(self.s.resize_waiters),
            pass_id=pass_id,
        )
        if self.s.generation_seen is None or self.s.generation_seen[0] != snapshot.generation:
            self.s.generation_seen = (snapshot.generation, workflow.now())
        results = await run_pass(pipeline, step_input, local=local)
        report = PassReport(
            workflow_id=workflow.info().workflow_id,
            generation=snapshot.generation,
            power_state=snapshot.power_state,
            deleting=snapshot.deleting,
            pipeline=[s.reported for s in pipeline],
            results=results,
        )
        self.s.passes += 1
        self.s.last_report = report
        tracing.pass_span(report, f"{self.s.namespace}/{self.s.name}")
        blocking = report.blocking
        self.s.transient_streak = (
            self.s.transient_streak + 1
            if blocking is not None and blocking.outcome is Outcome.TRANSIENT
            else 0
        )
        if not (snapshot.deleting and report.converged):
            await self._write_status(report, local=local)
        self._publish(summarize(report), report)
        return report

    async def _write_status(self, report: PassReport, *, local: bool) -> None:
        await call(
            steps.WRITE_STATUS,
            StatusInput(
                namespace=self.s.namespace,
                name=self.s.name,
                uid=self.s.uid or "",
                report=report,
                generation_seen_at=self.s.generation_seen[1] if self.s.generation_seen else None,
            ),
            local=local,
            start_to_close_timeout=SHORT,
            summary="write status and Events",
        )

    def _publish(self, summary: Summary, report: PassReport) -> None:
        """Show the pass in the Temporal UI and search attributes (upserted on change)."""
        workflow.set_current_details(ui.steps_table(report))
        if summary != self.s.summary:
            workflow.upsert_search_attributes(
                [
                    names.PHASE_ATTRIBUTE.value_set(summary.phase.value),
                    names.READY_ATTRIBUTE.value_set(summary.ready),
                    names.STEP_ATTRIBUTE.value_set(summary.step or "-"),
                ]
            )
        self.s.summary = summary

    def _answer_resize_waiters(self, report: PassReport) -> None:
        """Answer forced resizes once a pass shows the size synced, or a Terminal outcome."""
        if not self.s.resize_waiters:
            return
        resize = next((r for r in report.results if r.step == "resize"), None)
        blocking = report.blocking
        if resize is not None and resize.outcome is Outcome.SATISFIED:
            answer = ResizeResult(resized=True, reason=resize.reason, message=resize.message)
        elif blocking is not None and blocking.outcome is Outcome.TERMINAL:
            answer = ResizeResult(resized=False, reason=blocking.reason, message=blocking.message)
        else:
            return
        for request_id in self.s.resize_waiters:
            self.s.resized[request_id] = answer
        self.s.resize_waiters.clear()

    async def _wait(self, wait: Wait, report: PassReport) -> None:
        self.s.waiting_for = wait.summary
        if wait.at_once:
            return  # no timer: the next pass starts now
        self.s.next_wakeup = workflow.now() + wait.timeout if wait.timeout else None

        def requested() -> bool:
            return bool(self.s.rotations or self.s.resize_waiters)

        def woken() -> bool:
            return self.s.woken or requested()

        def changed() -> bool:
            newer = self.s.signaled_generation > report.generation
            return self.s.retry or newer or requested()

        done = woken if wait.wake_on_any_signal else changed
        try:
            await workflow.wait_condition(done, timeout=wait.timeout, timeout_summary=wait.summary)
        except TimeoutError:
            # Nothing woke a Ready instance: the next pass is a health check.
            self.s.health_check = report.converged and not report.deleting
        self.s.next_wakeup = None

    # Lifetime -------------------------------------------------------------------

    def _should_continue_as_new(self) -> bool:
        info = workflow.info()
        too_long = info.get_current_history_length() >= self.input.history_limit
        return (too_long or info.is_continue_as_new_suggested()) and not self.s.resize_waiters

    async def _continue_as_new(self) -> None:
        """Hand the small state to a new run once every request has been answered.

        Rotations that arrive meanwhile are served first; a forced resize needs a pass,
        so its arrival postpones continue-as-new to a later iteration.
        """
        while not self.s.resize_waiters:
            await self._serve_rotations()
            await workflow.wait_condition(
                lambda: (
                    workflow.all_handlers_finished()
                    or bool(self.s.rotations or self.s.resize_waiters)
                )
            )
            if workflow.all_handlers_finished() and not self.s.rotations:
                workflow.continue_as_new(
                    WorkflowInput(
                        namespace=self.s.namespace,
                        name=self.s.name,
                        history_limit=self.input.history_limit,
                        carried=self.s.carried(),
                    ),
                    task_timeout=TASK_TIMEOUT,  # as the watcher started it
                )


def _rotation_failure(error: ActivityError) -> str:
    """The answer to a rotation that failed: the activity's own refusal, or a generic
    sentence (the error's detail is in the activity's failure in history, never here)."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type in ROTATION_REFUSALS:
        return cause.message
    return (
        f"the rotation failed after {ROTATION_RETRY.maximum_attempts} attempts; the "
        "credentials Secret keeps a password that works (see the workflow's history)"
    )


def _update_id() -> str:
    info = workflow.current_update_info()
    if info is None:
        raise RuntimeError("an update handler runs outside an update")
    return info.id
