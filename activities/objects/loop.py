"""The loop a DBDatabase's or DBRole's step runs in: the instance steps' anatomy on
another kind.

A step is ``Anatomy(SPEC, observe, decide, act)``: ``observe(ctx, declared)`` reads,
``decide(observation)`` is pure, ``act(ctx, declared, observation, action)`` makes the
one change. ``run`` reads the object, observes, decides, acts, records the action as a
Normal Event, and looks again while the step has just acted and asks to be looked at
at once, as ``activities.steps.loop.run`` does for an instance. An error the world gives
a reason for (the API server's refusal, a lock) has its result
(``activities.steps.loop.answer``); PostgreSQL that does not answer is Transient.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import psycopg
from temporalio import activity

from activities.infra import postgres
from activities.infra.context import Context
from activities.infra.events import emit
from activities.objects.object import Declared, read
from activities.steps.loop import LOOK_AGAIN, answer
from dbi.objects import ObjectRef
from dbi.pipeline import StepSpec
from dbi.status import Event
from dbi.steps import AT_ONCE, Decision, Outcome, StepResult

A = TypeVar("A")
O = TypeVar("O")  # noqa: E741 (the observation's type)
GONE = "ObjectGone"
UNREACHABLE = "Unreachable"
UNREACHABLE_SECONDS = 10.0


@dataclass(frozen=True)
class Anatomy(Generic[O, A]):
    """A DBDatabase's or DBRole's step's parts (see the module's docstring)."""

    spec: StepSpec
    observe: Callable[[Context, Declared], O]
    decide: Callable[[O], Decision[A]]
    act: Callable[[Context, Declared, O, A], None] | None = None


def run(ctx: Context, step: Anatomy[Any, Any], ref: ObjectRef) -> StepResult:
    """Converge the object ``ref`` names with ``step``; see the module's docstring."""
    decision: Decision[Any] | None = None
    for _ in range(LOOK_AGAIN):
        declared = read(ctx.kube, ref)
        if declared is None:
            message = "The object is gone; the workflow ends at its next load."
            return step.spec.result(Outcome.PENDING, GONE, message, requeue_after_seconds=AT_ONCE)
        try:
            decision = _look(ctx, step, declared)
        except psycopg.OperationalError as e:
            activity.logger.warning("%s: PostgreSQL did not answer: %s", step.spec.name, e)
            message = "The instance's PostgreSQL did not answer; trying again."
            return step.spec.result(
                Outcome.TRANSIENT, UNREACHABLE, message, requeue_after_seconds=UNREACHABLE_SECONDS
            )
        except Exception as e:
            if (answered := answer(step.spec, e)) is None:
                raise
            return answered
        if decision.action is None or decision.result.requeue_after_seconds != AT_ONCE:
            break
        _announce(ctx, declared, decision.result)
    assert decision is not None
    return decision.result


def _look(ctx: Context, step: Anatomy[Any, Any], declared: Declared) -> Decision[Any]:
    observation = step.observe(ctx, declared)
    decision = step.decide(observation)
    if decision.action is not None:
        if decision.result.outcome is not Outcome.PENDING:
            raise AssertionError(f"{step.spec.name} acts but says {decision.result.outcome}")
        assert step.act is not None
        postgres.drop_sessions()
        try:
            step.act(ctx, declared, observation, decision.action)
        finally:
            postgres.drop_sessions()
    return decision


def _announce(ctx: Context, declared: Declared, acted: StepResult) -> None:
    activity.logger.info("%s acted (%s): %s", acted.step, acted.reason, acted.message)
    event = Event(
        type="Normal", reason=acted.reason, message=f"{acted.condition_type}: {acted.message}"
    )
    now = datetime.now(UTC).replace(microsecond=0)
    emit(ctx.kube, declared, event, now, kind=declared.kind.kind)
