"""What every step activity is given: the Kubernetes access and the configuration."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio import activity

from activities.events import emit
from activities.kube import Instance, Kube
from dbi.config import Config
from dbi.status import Event
from dbi.steps import Outcome, StepInput, StepResult


@dataclass(frozen=True)
class Context:
    kube: Kube
    config: Config


# The requeue hint of a step that has just changed something: the change is observed
# at once (the API server reads back its own writes), with no timer. ``Step.on`` looks
# again itself, within the same activity, up to LOOK_AGAIN times; a hint still
# AT_ONCE after that goes to the workflow, whose next pass starts without a timer.
AT_ONCE = 0.0
LOOK_AGAIN = 6


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
        """Load the instance and converge it; a gone instance is reported as such.

        A step that has just acted (Pending, AT_ONCE) observes again at once: the
        result is always that of a fresh observation, and a step that takes a few
        quick actions in a row (a role, then its database, then the password) takes
        them in one activity instead of one pass each.
        """
        for _ in range(LOOK_AGAIN):
            instance = load(self.ctx, step_input)
            if instance is None:
                return gone(step, condition)
            outcome = self.converge(instance, step_input)
            if not _acted(outcome):
                break
            self._announce(instance, outcome)
        return outcome

    def _announce(self, instance: Instance, acted: StepResult) -> None:
        """Log the action and record it as a Normal Event (best effort, like all Events)."""
        activity.logger.info("%s acted (%s): %s", acted.step, acted.reason, acted.message)
        message = f"{acted.condition_type}: {acted.message}"
        emit(
            self.ctx.kube,
            instance,
            Event(type="Normal", reason=acted.reason, message=message),
            datetime.now(UTC).replace(microsecond=0),
        )

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        raise NotImplementedError


def _acted(outcome: StepResult) -> bool:
    return outcome.outcome is Outcome.PENDING and outcome.requeue_after_seconds == AT_ONCE
