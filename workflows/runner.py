"""Run one pass of a pipeline of steps: each an activity, in order, while Satisfied.

The runner knows nothing of DBInstances: a pipeline is a sequence of StepSpecs (the
activity to call, the condition it owns, the UI summary), so another resource kind
can use it with steps of its own. Workflow code only: deterministic, no I/O.

A pass runs its steps as activities, or, when ``local``, as local activities: the
worker that runs the workflow task runs them too, and the whole pass is one workflow
task whose results history records as markers, instead of a round trip through the
server's task queues per step. The workflow chooses which (workflows/dbinstance.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import CancelledError, FailureError

with workflow.unsafe.imports_passed_through():
    from dbi.pipeline import StepSpec
    from dbi.steps import STEP_FAILED, Outcome, StepResult

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
    past_held: Callable[[], bool] = lambda: False,
) -> list[StepResult]:
    """Run ``steps`` in order while they are Satisfied; return the results of those that ran.

    A Pending step whose action is held (``StepResult.held``: it waits for a window or
    an operator) does not end the pass when ``past_held()`` says so: the steps after it
    run (health checks go on while a restart waits for days). ``past_held`` is asked
    only when a held result comes (the workflow's patch marker).

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
        if result.outcome is Outcome.SATISFIED:
            continue
        if not (result.outcome is Outcome.PENDING and result.held and past_held()):
            break
    return results
