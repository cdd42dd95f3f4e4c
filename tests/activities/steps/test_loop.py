"""The shared loop every step runs in: it starts from its pass's read, and a step that
has just acted observes again in the same activity (plain data)."""

from __future__ import annotations

import json
from collections import deque
from typing import cast

import psycopg
import pytest
from kubernetes import client as k8s

from activities.infra.context import Context, PassReads
from activities.infra.kube import Instance, Kube
from activities.steps.loop import LOOK_AGAIN, NAMESPACE_TERMINATING_WAIT_SECONDS, Anatomy
from activities.steps.loop import run as run_step
from dbi import pipeline
from dbi.config import Config
from dbi.pipeline import StepSpec
from dbi.steps import AT_ONCE, Decision, Outcome, StepInput, StepResult
from tests.activities.reads import _Instance, _Reads

INPUT = StepInput(namespace="team-a", name="db", uid="uid-1")


class Scripted:
    """A step whose decisions are scripted: each look takes the next (the last repeats);
    a Pending decision with the hint AT_ONCE comes with an action (it acted)."""

    def __init__(self, *outcomes: tuple[Outcome, float | None]) -> None:
        self.reads = _Reads()
        self.ctx = Context(kube=cast(Kube, self.reads), config=Config())
        self.outcomes = deque(outcomes)
        self.acted = 0

    def observe(self, ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
        return instance

    def decide(self, instance: Instance) -> Decision[str]:
        outcome, hint = self.outcomes.popleft() if len(self.outcomes) > 1 else self.outcomes[0]
        looked = pipeline.VM.result(outcome, outcome.value, "Looked.", requeue_after_seconds=hint)
        acted = outcome is Outcome.PENDING and hint == AT_ONCE
        return Decision(looked, "act" if acted else None)

    def act(self, ctx: Context, instance: Instance, observed: Instance, action: str) -> None:
        self.acted += 1

    def on(self, step_input: StepInput, spec: StepSpec = pipeline.VM) -> StepResult:
        anatomy = Anatomy(spec, self.observe, self.decide, self.act)
        return run_step(self.ctx, anatomy, step_input)


@pytest.mark.parametrize(
    ("script", "outcome", "observations", "actions"),
    [
        pytest.param(
            [(Outcome.PENDING, AT_ONCE), (Outcome.PENDING, AT_ONCE), (Outcome.SATISFIED, None)],
            Outcome.SATISFIED,
            3,
            2,
            id="acted-twice-then-satisfied",
        ),
        pytest.param([(Outcome.PENDING, 2.0)], Outcome.PENDING, 1, 0, id="waiting-is-not-acting"),
        pytest.param([(Outcome.TRANSIENT, AT_ONCE)], Outcome.TRANSIENT, 1, 0, id="failed"),
        pytest.param(
            [(Outcome.PENDING, AT_ONCE)], Outcome.PENDING, LOOK_AGAIN, LOOK_AGAIN, id="never-sticks"
        ),
    ],
)
def test_a_step_observes_again_after_acting_a_bounded_number_of_times(
    script: list[tuple[Outcome, float | None]], outcome: Outcome, observations: int, actions: int
) -> None:
    """Each look reads the instance afresh; a change that never sticks stops at the bound;
    every action is recorded as a Normal Event on the instance."""
    step = Scripted(*script)
    got = step.on(INPUT)
    assert got.outcome is outcome
    assert step.reads.reads == observations
    assert [(e.type, e.reason, e.message) for e in step.reads.events] == [
        ("Normal", "Pending", "VMProvisioned: Looked.")
    ] * actions


def test_a_step_starts_from_its_pass_read_and_reads_again_after_acting() -> None:
    """The steps of a pass share the instance its load read: a step that only observes
    makes no read of its own; one that acts reads afresh before looking again, and the
    steps after it start from that fresher read."""
    pass_input = INPUT.model_copy(update={"pass_id": "run-1/7"})
    observer = Scripted((Outcome.SATISFIED, None))
    passes = observer.ctx.passes
    passes.remember("run-1/7", cast(Instance, _Instance()))

    assert observer.on(pass_input).outcome is Outcome.SATISFIED
    assert observer.reads.reads == 0

    actor = Scripted((Outcome.PENDING, AT_ONCE), (Outcome.SATISFIED, None))
    actor.ctx.passes.remember("run-1/7", cast(Instance, _Instance()))
    fresh = cast(Instance, _Instance())
    actor.reads.instance = lambda namespace, name: fresh  # type: ignore[method-assign]
    assert actor.on(pass_input).outcome is Outcome.SATISFIED
    assert actor.ctx.passes.recall(pass_input) is fresh


def test_a_step_that_raises_reads_afresh_when_retried() -> None:
    """A step that raised on the pass's read does not retry on that same read: its retry,
    and the steps after it, read the instance afresh."""
    pass_input = INPUT.model_copy(update={"pass_id": "run-1/7"})
    stale, fresh = cast(Instance, _Instance()), cast(Instance, _Instance())
    seen: list[Instance] = []

    class Failing(Scripted):
        def observe(self, ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
            seen.append(instance)
            if instance is stale:
                raise k8s.ApiException(status=500, reason="Internal Server Error")
            return instance

    step = Failing((Outcome.SATISFIED, None))
    step.ctx.passes.remember("run-1/7", stale)
    step.reads.instance = lambda namespace, name: fresh  # type: ignore[method-assign]
    with pytest.raises(k8s.ApiException):
        step.on(pass_input)
    assert step.ctx.passes.recall(pass_input) is None
    assert step.on(pass_input).outcome is Outcome.SATISFIED
    assert seen == [stale, fresh]
    assert step.ctx.passes.recall(pass_input) is fresh


def test_an_action_refused_by_a_changed_object_is_decided_again_on_a_fresh_read() -> None:
    """An action whose precondition no longer holds (409: the object changed since it was
    read) makes the step read the instance again and decide again, in the same activity."""
    stale, fresh = cast(Instance, _Instance()), cast(Instance, _Instance())
    acted_on: list[Instance] = []

    class Conflicted(Scripted):
        def act(self, ctx: Context, instance: Instance, observed: Instance, action: str) -> None:
            acted_on.append(instance)
            if instance is stale:
                raise k8s.ApiException(status=409, reason="Conflict")

    step = Conflicted((Outcome.PENDING, AT_ONCE), (Outcome.SATISFIED, None))
    step.ctx.passes.remember("run-1/7", stale)
    step.reads.instance = lambda namespace, name: fresh  # type: ignore[method-assign]
    got = step.on(INPUT.model_copy(update={"pass_id": "run-1/7"}))
    assert got.outcome is Outcome.SATISFIED
    assert acted_on == [stale]


TERMINATING = {
    "kind": "Status",
    "reason": "Forbidden",
    "code": 403,
    "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            TERMINATING, (Outcome.PENDING, "NamespaceTerminating"), id="namespace-terminating"
        ),
        pytest.param(
            {"kind": "Status", "reason": "Forbidden", "code": 403},
            (Outcome.TRANSIENT, "Forbidden"),
            id="rbac",
        ),
        pytest.param("not json", (Outcome.TRANSIENT, "Forbidden"), id="no-status"),
    ],
)
def test_a_step_refused_by_a_terminating_namespace_waits(
    body: object, expected: tuple[Outcome, str]
) -> None:
    """Creating in a namespace being deleted is refused (403, NamespaceTerminating): the
    step waits for the teardown; any other 403 (RBAC, a quota) is Transient, Forbidden."""
    step = Scripted((Outcome.SATISFIED, None))

    def refused(ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
        error = k8s.ApiException(status=403, reason="Forbidden")
        error.body = body if isinstance(body, str) else json.dumps(body)
        raise error

    step.observe = refused  # type: ignore[method-assign]
    got = step.on(INPUT, pipeline.CREDENTIALS)
    assert (got.outcome, got.reason) == expected
    if got.reason == "NamespaceTerminating":
        assert got.requeue_after_seconds == NAMESPACE_TERMINATING_WAIT_SECONDS > AT_ONCE


@pytest.mark.parametrize(
    ("status", "headers", "expected"),
    [
        pytest.param(422, {}, (Outcome.TERMINAL, "Invalid", None), id="invalid"),
        pytest.param(429, {"Retry-After": "7"}, (Outcome.TRANSIENT, "Throttled", 7.0), id="429"),
        pytest.param(429, {}, (Outcome.TRANSIENT, "Throttled", 5.0), id="429-no-retry-after"),
        pytest.param(409, {}, (Outcome.TRANSIENT, "Conflict", None), id="lasting-conflict"),
        pytest.param(
            503, {"Retry-After": "12"}, (Outcome.TRANSIENT, "Unavailable", 12.0), id="503-says-when"
        ),
    ],
)
def test_the_api_servers_refusals_each_have_their_outcome(
    status: int, headers: dict[str, str], expected: tuple[Outcome, str, float | None]
) -> None:
    """422 is Terminal (the same write would be refused again); 429 waits the server's
    Retry-After; a 409 that lasts through every fresh read is Transient. None of them is
    "failed unexpectedly", and the message carries no detail of the request."""
    step = Scripted((Outcome.SATISFIED, None))

    def refused(ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
        error = k8s.ApiException(status=status, reason="Refused")
        error.headers = headers
        error.body = json.dumps({"kind": "Status", "message": "secret detail", "code": status})
        raise error

    step.observe = refused  # type: ignore[method-assign]
    got = step.on(INPUT, pipeline.CREDENTIALS)
    assert (got.outcome, got.reason, got.requeue_after_seconds) == expected
    assert "secret detail" not in got.message


def test_a_server_error_is_raised_for_the_activitys_retries() -> None:
    step = Scripted((Outcome.SATISFIED, None))

    def failing(ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
        raise k8s.ApiException(status=503, reason="Service Unavailable")

    step.observe = failing  # type: ignore[method-assign]
    with pytest.raises(k8s.ApiException):
        step.on(INPUT, pipeline.CREDENTIALS)


@pytest.mark.parametrize(
    "step_input",
    [
        pytest.param(INPUT, id="no-pass-id"),
        pytest.param(INPUT.model_copy(update={"pass_id": "run-1/8"}), id="another-pass"),
        pytest.param(
            INPUT.model_copy(update={"pass_id": "run-1/7", "uid": "uid-2"}), id="another-uid"
        ),
    ],
)
def test_a_step_reads_the_instance_itself_without_its_pass_read(step_input: StepInput) -> None:
    """Another worker's pass, an evicted one, or an instance replaced under the same name
    (another UID): the step reads the instance itself."""
    step = Scripted((Outcome.SATISFIED, None))
    step.ctx.passes.remember("run-1/7", cast(Instance, _Instance()))
    step.on(step_input)
    assert step.reads.reads == 1


def test_the_pass_reads_kept_are_the_most_recent() -> None:
    passes = PassReads(size=2)
    for n in range(3):
        passes.remember(f"run-1/{n}", cast(Instance, _Instance()))
    kept = [passes.recall(INPUT.model_copy(update={"pass_id": f"run-1/{n}"})) for n in range(3)]
    assert [k is not None for k in kept] == [False, True, True]


def test_a_paused_step_observes_and_reports_what_it_would_do_but_never_acts() -> None:
    """dbi.dev/paused: a step that would act reports Pending, reason Paused, with what it
    would do; it takes no action and records no Event; a step with nothing to do is
    Satisfied as ever."""
    paused = INPUT.model_copy(update={"paused": True})
    actor = Scripted((Outcome.PENDING, AT_ONCE))
    got = actor.on(paused)
    assert (got.outcome, got.reason) == (Outcome.PENDING, "Paused")
    assert got.message == "Paused by dbi.dev/paused; would act: Looked."
    assert actor.acted == 0
    assert actor.reads.events == []
    settled = Scripted((Outcome.SATISFIED, None))
    assert settled.on(paused).outcome is Outcome.SATISFIED


def test_a_statement_that_waited_out_its_lock_timeout_leaves_the_step_pending() -> None:
    """A session holding a lock the step needs (lock_timeout ran out): Pending, reason
    Locked, looked at again after a while; not an error."""
    step = Scripted((Outcome.PENDING, AT_ONCE))

    def blocked(ctx: Context, instance: Instance, observed: Instance, action: str) -> None:
        raise psycopg.errors.LockNotAvailable("canceling statement due to lock timeout")

    step.act = blocked  # type: ignore[method-assign]
    got = step.on(INPUT, pipeline.CREDENTIALS)
    assert (got.outcome, got.reason) == (Outcome.PENDING, "Locked")
    assert got.requeue_after_seconds is not None and got.requeue_after_seconds > AT_ONCE


def test_no_step_converges_a_spec_the_worker_cannot_read() -> None:
    """An instance whose stored spec the models cannot read (a newer CRD): the step
    neither observes nor acts, and says why, Terminal."""
    step = Scripted((Outcome.SATISFIED, None))
    unreadable = _Instance()
    unreadable.unreadable = "spec.backup: Extra inputs are not permitted"
    step.ctx.passes.remember(INPUT.pass_id or "run-1/7", cast(Instance, unreadable))
    observed: list[str] = []

    def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Instance:
        observed.append("looked")
        return instance

    step.observe = observe  # type: ignore[method-assign]
    got = step.on(INPUT.model_copy(update={"pass_id": "run-1/7"}), pipeline.CREDENTIALS)
    assert (got.outcome, got.reason) == (Outcome.TERMINAL, "SpecUnreadable")
    assert "spec.backup" in got.message and observed == []
