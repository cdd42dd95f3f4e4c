"""What every step activity is given: the Kubernetes access and the configuration."""

from __future__ import annotations

from dataclasses import dataclass

from activities.kube import Instance, Kube
from dbi.config import Config
from dbi.steps import Outcome, StepInput, StepResult


@dataclass(frozen=True)
class Context:
    kube: Kube
    config: Config


# The requeue hint of a step that has just changed something: the next pass observes
# the change at once (the API server reads back its own writes), with no timer.
AT_ONCE = 0.0


def result(
    step: str,
    condition: str,
    outcome: Outcome,
    reason: str,
    message: str,
    *,
    requeue_after: float | None = None,
    **facts: object,
) -> StepResult:
    """Return a StepResult; ``facts`` are the typed fields of ``dbi.steps.Facts``."""
    return StepResult.model_validate(
        {
            "step": step,
            "outcome": outcome,
            "condition_type": condition,
            "reason": reason,
            "message": message,
            "requeue_after_seconds": requeue_after,
            "facts": facts,
        }
    )


def load(ctx: Context, step_input: StepInput) -> Instance | None:
    """Read the step's instance; None when it is gone or is another object of the same name."""
    instance = ctx.kube.instance(step_input.namespace, step_input.name)
    if instance is None or instance.uid != step_input.uid:
        return None
    return instance


def gone(step: str, condition: str) -> StepResult:
    """The result of a step whose instance disappeared: the next load ends the workflow."""
    return result(step, condition, Outcome.PENDING, "InstanceGone", "The instance is gone.")


class Activity:
    """Base of the activity classes: the Context they run with."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx


class Step(Activity):
    """A step activity: ``converge`` runs on the step's instance, when it still exists."""

    def on(self, step_input: StepInput, step: str, condition: str) -> StepResult:
        """Load the instance and converge it; a gone instance is reported as such."""
        instance = load(self.ctx, step_input)
        if instance is None:
            return gone(step, condition)
        return self.converge(instance, step_input)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        raise NotImplementedError
