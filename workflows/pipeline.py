"""Run one pass of a pipeline of steps: each an activity, in order, while Satisfied.

The runner knows nothing of DBInstances: a pipeline is a sequence of StepSpecs (the
activity to call, the condition it owns, the UI summary), so another resource kind
can use it with steps of its own. Workflow code only: deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from dbi.pipeline import StepSpec
    from dbi.steps import Outcome, StepResult

# An activity that raises is retried this many times in all before the pass treats
# it as Transient: a few quick tries absorb a blip, the workflow's back-off the rest.
STEP_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)

STEP_FAILED = "StepFailed"


def failed(step: StepSpec) -> StepResult:
    """The result of a step whose activity kept raising: Transient, with a stable message."""
    return StepResult(
        step=step.name,
        outcome=Outcome.TRANSIENT,
        condition_type=step.condition_type,
        reason=STEP_FAILED,
        message=f"The {step.name} step failed unexpectedly; retrying with back-off.",
    )


async def run_pass(steps: Sequence[StepSpec], step_input: BaseModel) -> list[StepResult]:
    """Run ``steps`` in order while they are Satisfied; return the results of those that ran.

    A step whose activity keeps raising becomes a Transient result with the generic
    reason ``StepFailed``: the workflow never fails because a step did. The error's
    detail stays in the activity's failure in history, logs and its span.
    """
    results: list[StepResult] = []
    for step in steps:
        try:
            result = await workflow.execute_activity(
                step.name,
                step_input,
                result_type=StepResult,
                start_to_close_timeout=step.timeout,
                retry_policy=STEP_RETRY,
                summary=step.summary,
            )
        except ActivityError:
            workflow.logger.warning("step %s failed after retries", step.name)
            result = failed(step)
        results.append(result)
        if result.outcome is not Outcome.SATISFIED:
            break
    return results
