"""Run one pass of a pipeline of steps: each an activity, in order, while Satisfied.

The runner knows nothing of DBInstances: a pipeline is a sequence of StepSpecs (the
activity to call, the condition it owns, the UI summary), so another resource kind
can use it with steps of its own. Workflow code only: deterministic, no I/O.

A pass runs its steps as activities, or, when ``local``, as local activities: the
worker that runs the workflow task runs them too, and the whole pass is one workflow
task whose results history records as markers, instead of a round trip through the
server's task queues per step. ``run_pass_in_one`` goes further: one local activity
runs the steps one after the other (``dbi.steps.in_order``) and history records one
marker for them all, and with the pass's status to write, runs that write too
(``run_pass``): one marker a pass for the steps and the status. The workflow chooses
which (workflows/dbinstance.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from dbi.passes import PassInput, PendingStatus
    from dbi.pipeline import RUN_PASS, StepSpec
    from dbi.steps import (
        STEP_FAILED,
        InstanceSnapshot,
        Outcome,
        StepInput,
        StepResult,
        StepsInput,
        StepsResult,
        goes_on,
    )

# An activity that raises is retried this many times in all before the pass treats
# it as Transient: a few quick tries absorb a blip, the workflow's back-off the rest.
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)


async def call(
    activity: str,
    arg: BaseModel,
    *,
    local: bool,
    result_type: type[Any] | None = None,
    **options: Any,
) -> Any:
    """Run ``activity``: as a local activity when ``local``, else as a regular one.

    ``options`` are the keyword arguments both kinds take (``start_to_close_timeout``,
    ``retry_policy``, ``summary``).
    """
    if local:
        return await workflow.execute_local_activity(
            activity, arg, result_type=result_type, **options
        )
    return await workflow.execute_activity(activity, arg, result_type=result_type, **options)


def failed(step: StepSpec) -> StepResult:
    """The result of a step whose activity kept raising: Transient, with a stable message."""
    return StepResult(
        step=step.name,
        outcome=Outcome.TRANSIENT,
        condition_type=step.condition_type,
        reason=STEP_FAILED,
        message=f"The {step.name} step failed unexpectedly; retrying with back-off.",
    )


async def run_pass(
    steps: Sequence[StepSpec],
    step_input: BaseModel,
    *,
    local: bool = False,
) -> list[StepResult]:
    """Run ``steps`` in order while the pass goes on (``dbi.steps.goes_on``); return the
    results of those that ran.

    A step whose activity keeps raising becomes a Transient result with the generic
    reason ``StepFailed``: the workflow never fails because a step did. The error's
    detail stays in the activity's failure in history, logs and its span.
    """
    results: list[StepResult] = []
    for step in steps:
        try:
            result = await call(
                step.name,
                step_input,
                local=local,
                result_type=StepResult,
                start_to_close_timeout=step.timeout,
                retry_policy=STEP_RETRY,
                summary=step.summary,
            )
        except FailureError as e:  # a local activity's failure is not an ActivityError
            if isinstance(e, CancelledError):
                raise
            workflow.logger.warning("step %s failed after retries", step.name)
            result = failed(step)
        results.append(result)
        if not goes_on(result):
            break
    return results


# The activity that runs a pass's steps is not retried: a step that raises ends it, and
# the pass goes on from that step with an activity per step, retried as a step is.
IN_ONE = RetryPolicy(maximum_attempts=1)
# What ``run_pass`` adds to its steps' time for the status write.
WRITE = timedelta(seconds=30)


R = TypeVar("R", bound=BaseModel)


async def in_one(
    activity: str,
    arg: BaseModel,
    result_type: type[R],
    *,
    timeout: timedelta,
    summary: str,
    instead: str,
) -> R | None:
    """Run ``activity`` as one local activity, not retried (``IN_ONE``); None when it
    failed or timed out (the log says what the workflow does ``instead``). A
    cancellation goes on up."""
    try:
        result: R = await workflow.execute_local_activity(
            activity,
            arg,
            result_type=result_type,
            start_to_close_timeout=timeout,
            retry_policy=IN_ONE,
            summary=summary,
        )
    except FailureError as e:
        if isinstance(e, CancelledError):
            raise
        workflow.logger.warning("%s failed in one activity; %s", activity, instead)
        return None
    return result


def steps_input(steps: Sequence[StepSpec], step_input: StepInput) -> StepsInput:
    """What the activity that runs ``steps`` in one go is given."""
    return StepsInput(steps=tuple(s.name for s in steps), step_input=step_input)


def in_one_timeout(steps: Sequence[StepSpec]) -> timedelta:
    """How long ``run_pass`` may take: its steps' timeouts and the status write's."""
    return sum((s.timeout for s in steps), timedelta(0)) + WRITE


async def run_pass_in_one(
    steps: Sequence[StepSpec],
    step_input: StepInput,
    *,
    status: PendingStatus,
    settle: InstanceSnapshot | None = None,
) -> tuple[list[StepResult], bool, bool]:
    """Run ``steps`` as ``run_pass`` would, in one local activity (``RUN_PASS``): one
    marker in history for the pass's steps and its ``status`` instead of one per step,
    one activation of the workflow. The second value says whether the activity wrote
    the status; when not, the workflow writes it. With ``settle`` (what the pass's load
    found), a pass that settles the instance has the worker re-check it
    (``PassInput.settle``): the third value says whether it does.

    What a step that raises or hangs gets is unchanged: from the step that raised (or
    from the first, when the activity itself failed or timed out) the pass goes on with
    ``run_pass``, a local activity per step, each retried and, after its retries,
    Transient (StepFailed).
    """
    arg = PassInput(steps=steps_input(steps, step_input), then=status, settle=settle)
    done = await in_one(
        RUN_PASS,
        arg,
        StepsResult,
        timeout=in_one_timeout(steps),
        summary="the steps, one after the other, then the status, while Satisfied",
        instead="one by one now",
    )
    if done is None:
        done = StepsResult(results=[], raised=steps[0].name if steps else None)
    results, written = await go_on_after(steps, step_input, done)
    return results, written, done.rechecked and written


async def go_on_after(
    steps: Sequence[StepSpec], step_input: StepInput, done: StepsResult
) -> tuple[list[StepResult], bool]:
    """The pass whose ``steps`` an activity ran in one go (``done``): its results, and
    whether that activity wrote the status; from a step that raised, the rest of the
    steps one by one (the status is then the workflow's to write)."""
    if done.raised is None:
        return done.results, done.written
    rest = [s.name for s in steps].index(done.raised)
    more = await run_pass(steps[rest:], step_input, local=True)
    return [*done.results, *more], False
