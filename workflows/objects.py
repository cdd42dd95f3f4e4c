"""DBDatabaseWorkflow and DBRoleWorkflow: one long-lived workflow per object of a kind
declared on an instance (``dbi.objects.KINDS``), on the instance's step contract.

Id ``dbdatabase/<namespace>/<name>`` (``dbrole/...``), started or woken by the watcher
(a ``wake`` signal) on every change of the object and of its instance. A pass loads the
object (``load_object``), runs its kind's steps in order (``dbi.pipeline.DATABASE``,
``ROLE``, or the teardown once it is being deleted), one activity each, shown one by
one in the Temporal UI, stopping at the first that is not Satisfied, then writes the
status (``write_object_status``). Between passes it waits as ``wait_after`` says, or until
woken. It completes when the teardown converged or the object is gone; an object
recreated under the same name is followed into a new run. A step whose activity keeps
raising is Transient (``StepFailed``): the workflow never fails because a step did.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline
    from dbi.objects import KINDS, Loaded, ObjectPass, ObjectRef
    from dbi.pipeline import StepSpec
    from dbi.steps import STEP_FAILED, Outcome, StepResult
    from workflows.waiting import AT_ONCE_FALLBACK, AT_ONCE_LIMIT, DEFAULT_PENDING, backoff

# A Ready object is looked at again this often (a database dropped by hand comes back);
# a Terminal one too, since what stalls it (its instance, a foreign database) can change
# with no event of its own.
RECHECK = timedelta(minutes=10)
PASSES_PER_RUN = 200  # then continue-as-new: a run's history stays short
SHORT = timedelta(seconds=30)
STEP_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=5), maximum_attempts=3)


def wait_after(
    results: list[StepResult], *, transient_streak: int, at_once_streak: int
) -> timedelta:
    """How long to wait after a pass whose steps returned ``results`` (pure): Ready and
    Terminal re-check after RECHECK, Pending after its hint (0: at once, up to
    AT_ONCE_LIMIT passes in a row), Transient backs off."""
    blocking = next((r for r in results if r.outcome is not Outcome.SATISFIED), None)
    if blocking is None or blocking.outcome is Outcome.TERMINAL:
        return RECHECK
    if blocking.outcome is Outcome.TRANSIENT:
        return backoff(transient_streak)
    hint = blocking.requeue_after_seconds
    if hint is None:
        return DEFAULT_PENDING
    if hint == 0:
        return timedelta(0) if at_once_streak < AT_ONCE_LIMIT else AT_ONCE_FALLBACK
    return timedelta(seconds=hint)


class _Converges:
    """What each kind's workflow does (the Temporal types below only name it)."""

    def __init__(self) -> None:
        self._woken = False

    def _wake(self) -> None:
        self._woken = True

    async def _run(self, ref: ObjectRef) -> None:
        kind = KINDS[ref.kind]
        transient = at_once = 0
        for _ in range(PASSES_PER_RUN):
            self._woken = False
            loaded: Loaded = await workflow.execute_activity(
                pipeline.LOAD_OBJECT,
                ref.model_copy(update={"uid": ""}),
                result_type=Loaded,
                start_to_close_timeout=SHORT,
                retry_policy=STEP_RETRY,
            )
            if not loaded.exists:
                return
            if loaded.uid != ref.uid:  # another object of the name: its own run
                workflow.continue_as_new(ref.model_copy(update={"uid": loaded.uid}))
            steps = kind.teardown if loaded.deleting else kind.steps
            results = await self._pass(ref, steps)
            await workflow.execute_activity(
                pipeline.WRITE_OBJECT_STATUS,
                ObjectPass(
                    ref=ref,
                    workflow_id=workflow.info().workflow_id,
                    generation=loaded.generation,
                    deleting=loaded.deleting,
                    results=results,
                ),
                start_to_close_timeout=SHORT,
                retry_policy=STEP_RETRY,
            )
            settled = all(r.outcome is Outcome.SATISFIED for r in results)
            if loaded.deleting and settled and len(results) == len(steps):
                return
            transient = transient + 1 if results[-1].outcome is Outcome.TRANSIENT else 0
            wait = wait_after(results, transient_streak=transient, at_once_streak=at_once)
            at_once = at_once + 1 if not wait else 0
            if wait:
                await self._wait(wait)
        workflow.continue_as_new(ref)

    async def _wait(self, wait: timedelta) -> None:
        """Until woken, or ``wait`` has passed (a durable timer)."""
        try:
            summary = f"look again in {wait.total_seconds():.0f}s, or when woken"
            await workflow.wait_condition(
                lambda: self._woken, timeout=wait, timeout_summary=summary
            )
        except TimeoutError:
            pass

    async def _pass(self, ref: ObjectRef, steps: tuple[StepSpec, ...]) -> list[StepResult]:
        results: list[StepResult] = []
        for spec in steps:
            workflow.set_current_details(f"**{spec.name}**: {spec.summary}")
            try:
                result: StepResult = await workflow.execute_activity(
                    spec.name,
                    ref,
                    result_type=StepResult,
                    start_to_close_timeout=spec.timeout,
                    retry_policy=STEP_RETRY,
                    summary=spec.summary,
                )
            except ActivityError:
                result = spec.result(
                    Outcome.TRANSIENT, STEP_FAILED, "The step's activity kept failing."
                )
            results.append(result)
            if result.outcome is not Outcome.SATISFIED:
                break
        return results


@workflow.defn(name=names.DATABASE_WORKFLOW_TYPE)
class DBDatabaseWorkflow(_Converges):
    @workflow.signal(name=names.WAKE)
    def wake(self) -> None:
        self._wake()

    @workflow.run
    async def run(self, ref: ObjectRef) -> None:
        await self._run(ref)


@workflow.defn(name=names.ROLE_WORKFLOW_TYPE)
class DBRoleWorkflow(_Converges):
    @workflow.signal(name=names.WAKE)
    def wake(self) -> None:
        self._wake()

    @workflow.run
    async def run(self, ref: ObjectRef) -> None:
        await self._run(ref)
