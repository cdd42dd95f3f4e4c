"""teardown_finalizer (FinalizerRemoved): the finalizer goes last, and the instance with it.

Observes the finalizer; removes it (Pending), and the look that follows finds the
instance gone: that is the proof (Satisfied). Idempotency key: the finalizer list; the
patch names the list and resourceVersion it read, so a concurrent change makes it fail
(409) and the loop looks again, never dropping another's finalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import Anatomy
from dbi import names
from dbi.pipeline import TEARDOWN_FINALIZER as SPEC
from dbi.pipeline import StepSpec
from dbi.steps import AT_ONCE, Decision, StepInput, StepResult


class Reason(StrEnum):
    FINALIZER_REMOVED = SPEC.condition_type


class Action(StrEnum):
    REMOVE = "remove"


@dataclass(frozen=True, kw_only=True)
class Observation:
    has_finalizer: bool


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    return Observation(has_finalizer=names.FINALIZER in instance.finalizers)


def decide(obs: Observation) -> Decision[Action]:
    """Remove the finalizer if it is there (pure)."""
    if obs.has_finalizer:
        message = "The finalizer is being removed."
        return SPEC.pending(Reason.FINALIZER_REMOVED, message, Action.REMOVE, after=AT_ONCE)
    return SPEC.satisfied(Reason.FINALIZER_REMOVED, "The finalizer is removed.")


def removed(spec: StepSpec) -> StepResult:
    """The instance is gone with its finalizer: done (``decide`` without a finalizer)."""
    return decide(Observation(has_finalizer=False)).result


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    remaining = [f for f in instance.finalizers if f != names.FINALIZER]
    ctx.kube.set_finalizers(instance, remaining)


# The instance gone once its finalizer is removed is what the step waits for.
STEP = Anatomy(SPEC, observe, decide, act, when_gone=removed)
