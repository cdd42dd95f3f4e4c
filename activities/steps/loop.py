"""What a step is, and the loop every step runs in.

A step is a module (``activities/steps/<name>.py``) with one anatomy, whatever it converges:

- ``Observation``: what the step saw, facts only (a frozen dataclass);
- ``observe(ctx, instance, step_input) -> Observation``: reads, never writes;
- ``decide(observation) -> Decision``: pure; the step's result and, when the world must
  change, the one action to take (a successful action is Pending, always), made with
  one of ``SPEC.satisfied``, ``SPEC.pending``, ``SPEC.transient``, ``SPEC.terminal``;
- ``act(ctx, instance, observation, action)``: the one mutation; it reads again what
  it needs beyond the facts (a password, how to reach the guest) and acts only on
  what was observed (a resourceVersion among the facts), else does nothing;

tied together as ``STEP = Anatomy(SPEC, observe, decide, act)``, where ``SPEC`` is the
step's entry in the step table (``dbi.pipeline``). The shared loop (``run``) runs them:
it starts from the pass's read of the instance, stops a step that reads an object
under a child's name that is not the instance's (``activities.infra.ownership``), performs
the action, records it as a Normal Event, and looks again, within the same activity,
while the step has just acted and asks to be looked at at once. None of the calls may
block waiting for a transition, and each must be idempotent: a step may run again at
any time, after any failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

import psycopg
from kubernetes import client as k8s
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from temporalio import activity

from activities.infra import ownership, postgres
from activities.infra.context import Context
from activities.infra.events import emit
from activities.infra.kube import Instance, api_error, namespace_terminating
from activities.infra.reads import confirm_fresh, rests_on_views
from dbi.pipeline import StepSpec
from dbi.status import Event
from dbi.steps import AT_ONCE, PAUSED, Decision, Outcome, StepInput, StepResult

# A step that has just acted with the hint AT_ONCE (dbi.steps) is looked at again by
# ``run`` itself, within the same activity, up to LOOK_AGAIN times; a hint still AT_ONCE
# after that goes to the workflow, whose next pass starts without a timer.
LOOK_AGAIN = 6
# The reasons any step may report (besides the pass's StepFailed, dbi.steps).
INSTANCE_GONE = "InstanceGone"
NAMESPACE_TERMINATING = "NamespaceTerminating"
SPEC_UNREADABLE = "SpecUnreadable"
# A step that may not create in a namespace being deleted waits this long; its next pass
# finds the instance deleted too (the namespace's deletion deletes it) and tears it down.
NAMESPACE_TERMINATING_WAIT_SECONDS = 1.0


def load(ctx: Context, step_input: StepInput) -> Instance | None:
    """Read the step's instance; None when it is gone or is another object of the same name.

    What is read is remembered as the pass's instance (``PassReads``).
    """
    instance = ctx.kube.instance(step_input.namespace, step_input.name)
    if instance is None or instance.uid != step_input.uid:
        return None
    ctx.passes.remember(step_input.pass_id, instance)
    return instance


def gone(spec: StepSpec) -> StepResult:
    """The result of a step whose instance disappeared: the next load ends the workflow."""
    return spec.result(Outcome.PENDING, INSTANCE_GONE, "The instance is gone.")


def unreadable(spec: StepSpec, why: str) -> StepResult:
    """The result of a step whose instance's spec this worker cannot read: Terminal
    until the spec changes (or a worker that reads it runs); deleting it still works."""
    message = (
        f"This worker cannot read the spec ({why}): the CRD may be newer or older than "
        "the worker. Fix the field, or run a worker that knows it; deleting the "
        "instance still tears it down."
    )
    return spec.result(Outcome.TERMINAL, SPEC_UNREADABLE, message[:512])


def terminating(spec: StepSpec) -> StepResult:
    """The result of a step refused because the instance's namespace is being deleted: no
    use retrying; the next pass tears the instance down."""
    return spec.result(
        Outcome.PENDING,
        NAMESPACE_TERMINATING,
        "The namespace is being deleted; the instance will be torn down.",
        requeue_after_seconds=NAMESPACE_TERMINATING_WAIT_SECONDS,
    )


# What the API server's refusals mean for a step (a 5xx or a lost connection is raised:
# the activity's retries absorb a blip, the workflow's back-off the rest).
FORBIDDEN = "Forbidden"  # 403: RBAC, a quota, an admission policy
INVALID = "Invalid"  # 422: an object the step wrote was rejected
THROTTLED = "Throttled"  # 429: the API server asks to come back later
CONFLICT = "Conflict"  # 409 after LOOK_AGAIN fresh reads
UNAVAILABLE = "Unavailable"  # a 5xx that says when to come back (Retry-After)
THROTTLED_WAIT_SECONDS = 5.0  # a 429 without Retry-After
LOCKED = "Locked"  # a statement waited lock_timeout for another session's lock
LOCKED_WAIT_SECONDS = 10.0


class Refused(Exception):
    """An action the world refused in a way only a change of the spec can lift (a value
    PostgreSQL will not take): ``result`` is the step's, Terminal."""

    def __init__(self, result: StepResult) -> None:
        super().__init__(result.message)
        self.result = result


def answer(spec: StepSpec, error: BaseException) -> StepResult | None:
    """What an error that ended a look means for the step, when it means something a
    retry of the activity would not change; None: raise it (the activity is retried).

    A namespace being deleted, a database lock held past lock_timeout, and the API
    server's refusals each have a result of their own. A refusal's detail goes on the
    step's span and in the worker's log, never in the condition.
    """
    if isinstance(error, Refused):
        return error.result
    if isinstance(error, psycopg.errors.LockNotAvailable):
        activity.logger.warning("%s: a lock it needs is held (lock_timeout)", spec.name)
        return locked(spec)
    if not isinstance(error, k8s.ApiException):
        return None
    if namespace_terminating(error):
        return terminating(spec)
    refused = refusal(spec, error)
    if refused is not None:
        _record_refusal(spec, error)
    return refused


def refusal(spec: StepSpec, error: k8s.ApiException) -> StepResult | None:
    """The result of a step the API server refused, by status; None for any other error.

    A 422 is Terminal: the same request would be refused again until the spec changes.
    403, 429 and a lasting 409 are Transient: they pass (a quota raised, RBAC fixed, the
    load gone), and 429 waits at least the server's Retry-After, as does a 5xx that
    sends one (a 5xx without it is raised: the activity's retries absorb a blip). The
    detail (which quota, which field) is in the worker's log, not the condition: it may
    quote what was written.
    """
    if error.status == 422:
        return spec.result(
            Outcome.TERMINAL,
            INVALID,
            "The API server rejected an object this step wrote as invalid (422); the "
            "worker's log says which. Change the spec, or report it.",
        )
    if error.status == 403:
        return spec.result(
            Outcome.TRANSIENT,
            FORBIDDEN,
            "The API server refused a request (403: RBAC, a quota or an admission policy); "
            "retrying with back-off. The worker's log names the request.",
        )
    if error.status == 429:
        return spec.result(
            Outcome.TRANSIENT,
            THROTTLED,
            "The API server asked to slow down (429); waiting as it said.",
            requeue_after_seconds=_retry_after(error),
        )
    if error.status == 409:
        return spec.result(
            Outcome.TRANSIENT,
            CONFLICT,
            "The objects kept changing under this step (409); retrying with back-off.",
        )
    if error.status is not None and error.status >= 500 and _says_when(error):
        return spec.result(
            Outcome.TRANSIENT,
            UNAVAILABLE,
            f"The API server is unavailable ({error.status}); waiting as it said.",
            requeue_after_seconds=_retry_after(error),
        )
    return None


def locked(spec: StepSpec) -> StepResult:
    """The result of a step whose statement waited lock_timeout for a lock another session
    holds (a user's open transaction on the app role, say): this instance waits; no
    thread or other instance does."""
    return spec.result(
        Outcome.PENDING,
        LOCKED,
        "A database session holds a lock this step needs (on a role or the database); "
        "waiting for it to end. pg_locks on the instance shows which session.",
        requeue_after_seconds=LOCKED_WAIT_SECONDS,
    )


def _record_refusal(spec: StepSpec, error: k8s.ApiException) -> None:
    """Put the refusal's detail where details go: the step's span and the worker's log, in
    the API server's own words (never the request), not the condition."""
    span = trace.get_current_span()
    span.record_exception(error)
    span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    activity.logger.warning("%s: the API server refused: %s", spec.name, api_error(error))


def _says_when(error: k8s.ApiException) -> bool:
    headers = error.headers or {}
    return "Retry-After" in headers or "retry-after" in headers


def _retry_after(error: k8s.ApiException) -> float:
    headers = error.headers or {}
    value = headers.get("Retry-After") or headers.get("retry-after")
    try:
        return max(float(value), 0.0) if value is not None else THROTTLED_WAIT_SECONDS
    except ValueError:
        return THROTTLED_WAIT_SECONDS


A = TypeVar("A")
O = TypeVar("O")  # noqa: E741 (the observation's type)


@dataclass(frozen=True)
class Anatomy(Generic[O, A]):
    """A step's parts, as its module defines them (see the module's docstring)."""

    spec: StepSpec
    observe: Callable[[Context, Instance, StepInput], O]
    decide: Callable[[O], Decision[A]]
    act: Callable[[Context, Instance, O, A], None] | None = None
    # The objects under the instance's child names the observation holds (ownership).
    children: Callable[[O], list[Any]] | None = None
    # The result when the instance is gone (default: Pending, the next load ends it).
    when_gone: Callable[[StepSpec], StepResult] = gone


def run(ctx: Context, step: Anatomy[Any, Any], step_input: StepInput) -> StepResult:
    """Converge the instance as its pass read it (or as read now, when this process does
    not have the pass's read); a gone instance is reported as ``step.when_gone`` says.

    A step that has just acted and asks to be looked at at once (Pending, AT_ONCE)
    reads the instance again and observes again: the result is always that of a fresh
    observation, and a step that takes a few quick actions in a row (a role, then its
    database, then the password) takes them in one activity instead of one pass each.
    """
    instance = ctx.passes.recall(step_input)
    if instance is not None and instance.viewed:
        rests_on_views()
    decision: Decision[Any] | None = None
    for look in range(LOOK_AGAIN):
        if look or instance is None:
            instance = load(ctx, step_input)
        if instance is None:
            return step.when_gone(step.spec)
        try:
            decision = _look(ctx, step, instance, step_input)
        except BaseException as e:
            ctx.passes.forget(step_input.pass_id)
            if isinstance(e, k8s.ApiException) and e.status == 409 and look + 1 < LOOK_AGAIN:
                # What the action was based on changed since it was read (a precondition
                # failed): read again and look again.
                instance = None
                continue
            if (answered := answer(step.spec, e)) is None:
                raise
            return answered
        if decision.action is None or decision.result.requeue_after_seconds != AT_ONCE:
            break
        _announce(ctx, instance, decision.result)
    assert decision is not None
    return decision.result


def _look(
    ctx: Context, step: Anatomy[Any, Any], instance: Instance, step_input: StepInput
) -> Decision[Any]:
    """Observe, decide, and perform the decided action (a successful one is Pending).
    Nothing converges a spec this worker cannot read: only a teardown runs on one."""
    if instance.unreadable is not None and not instance.deleting:
        return Decision(unreadable(step.spec, instance.unreadable))
    observation = step.observe(ctx, instance, step_input)
    children = step.children(observation) if step.children is not None else []
    refused = ownership.refusal_of(ctx.kube, step.spec, instance, children)
    if refused is not None:
        if refused.action is not None:
            if step_input.paused:
                return held(refused.result)
            confirm_fresh()
            ownership.adopt(ctx.kube, instance, refused.action)
        return refused
    decision = step.decide(observation)
    if decision.action is not None and step_input.paused:
        return held(decision.result)
    if decision.action is not None:
        if decision.result.outcome is not Outcome.PENDING:
            raise AssertionError(f"{step.spec.name} acts but says {decision.result.outcome}")
        assert step.act is not None
        confirm_fresh()  # an idle pass acts on fresh reads only
        postgres.drop_sessions()
        try:
            step.act(ctx, instance, observation, decision.action)
        finally:
            postgres.drop_sessions()  # what the step changed is seen by new logins
    return decision


def held(would: StepResult) -> Decision[Any]:
    """The decision of a step that would act while dbi.dev/paused holds every action."""
    message = f"Paused by dbi.dev/paused; would act: {would.message}"
    result = would.model_copy(
        update={
            "outcome": Outcome.PENDING,
            "reason": PAUSED,
            "message": message[:512],
            "requeue_after_seconds": None,
        }
    )
    return Decision(result)


def _announce(ctx: Context, instance: Instance, acted: StepResult) -> None:
    """Log the action and record it as a Normal Event (best effort, like all Events)."""
    activity.logger.info("%s acted (%s): %s", acted.step, acted.reason, acted.message)
    message = f"{acted.condition_type}: {acted.message}"
    emit(
        ctx.kube,
        instance,
        Event(type="Normal", reason=acted.reason, message=message),
        datetime.now(UTC).replace(microsecond=0),
    )
