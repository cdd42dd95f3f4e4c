"""Status derivation from a pass, with plain data: conditions, phase, Events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dbi import pipeline
from dbi.models import ConditionStatus, DBInstanceStatus, Phase, Served
from dbi.spec import PowerState
from dbi.status import PassReport, derive, summarize
from dbi.steps import Facts, Outcome
from tests.dbi.passes import STEPS, converged, held_then, report, result, until

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def conditions(status: DBInstanceStatus) -> dict[str, tuple[str, str]]:
    return {c.type: (c.status.value, c.reason) for c in status.conditions}


def test_a_converged_pass_is_ready_with_every_condition_true() -> None:
    """Every step Satisfied: Ready True, not reconciling or stalled, generation observed."""
    status, _ = derive(DBInstanceStatus(), converged(), now=T0)
    found = conditions(status)
    assert found["Ready"] == ("True", "Converged")
    assert found["Reconciling"][0] == found["Stalled"][0] == "False"
    assert all(found[s.condition_type] == ("True", "Ok") for s in STEPS)
    assert status.observed_generation == status.converged_generation == 2
    assert status.phase is Phase.RUNNING
    assert status.workflow_id == "dbinstance/ns/db"


@pytest.mark.parametrize(
    "pass_",
    [
        pytest.param(converged(generation=3), id="converged"),
        pytest.param(
            report(result("preflight", Outcome.TERMINAL, "Bad"), generation=3), id="stalled"
        ),
        pytest.param(
            report(result("preflight", Outcome.PENDING, "Wait"), generation=3), id="pending"
        ),
    ],
)
def test_every_status_write_names_the_generation_it_describes(pass_: PassReport) -> None:
    """kstatus reads conditions only at the generation they describe: the status and every
    condition carry the generation the pass read, whatever the pass's outcome."""
    previous, _ = derive(DBInstanceStatus(), converged(generation=2), now=T0)
    status, _ = derive(previous, pass_, now=T0)
    assert status.observed_generation == 3
    assert {c.observed_generation for c in status.conditions} == {3}


def test_a_stalled_generation_is_stalled_at_that_generation() -> None:
    """A Terminal step at a new generation: Stalled True, Ready False, both at that
    generation (kstatus Failed at once, not InProgress until a GitOps timeout)."""
    previous, _ = derive(DBInstanceStatus(), converged(generation=1), now=T0)
    status, _ = derive(previous, until("vm", Outcome.TERMINAL, "ImageNotFound"), now=T0)
    stalled = next(c for c in status.conditions if c.type == "Stalled")
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (stalled.status.value, stalled.observed_generation) == ("True", 2)
    assert (ready.status.value, ready.observed_generation) == ("False", 2)
    assert status.converged_generation == 1


@pytest.mark.parametrize(
    ("pass_", "ready", "reconciling", "stalled", "phase"),
    [
        pytest.param(
            until("vm", Outcome.PENDING, "VMCreated"),
            "False",
            "True",
            "False",
            Phase.PROVISIONING,
            id="pending",
        ),
        pytest.param(
            until("preflight", Outcome.TERMINAL, "UnknownImage"),
            "False",
            "False",
            "True",
            Phase.FAILED,
            id="terminal",
        ),
        pytest.param(
            until("health", Outcome.TRANSIENT, "Unreachable"),
            "False",
            "True",
            "False",
            Phase.DEGRADED,
            id="transient",
        ),
        pytest.param(
            until("resize", Outcome.PENDING, "RestartRequired"),
            "False",
            "True",
            "False",
            Phase.RESIZING,
            id="resizing",
        ),
        pytest.param(
            converged(power=PowerState.STOPPED),
            "True",
            "False",
            "False",
            Phase.STOPPED,
            id="stopped",
        ),
    ],
)
def test_the_summary_conditions_follow_the_blocking_outcome(
    pass_: PassReport, ready: str, reconciling: str, stalled: str, phase: Phase
) -> None:
    """Ready, the kstatus conditions and the phase follow the step that ended the pass."""
    status, _ = derive(DBInstanceStatus(), pass_, now=T0)
    found = conditions(status)
    assert (found["Ready"][0], found["Reconciling"][0], found["Stalled"][0]) == (
        ready,
        reconciling,
        stalled,
    )
    assert status.phase is phase
    assert summarize(pass_).phase is phase


def test_steps_after_the_blocking_one_are_not_reached_and_convergence_is_kept() -> None:
    """Pending: False for its step, Unknown NotReached after it; the status describes the
    new generation, and convergedGeneration keeps the last one every step satisfied."""
    previous, _ = derive(DBInstanceStatus(), converged(generation=1), now=T0)
    status, _ = derive(previous, until("vm", Outcome.PENDING, "VMCreated"), now=T0)
    found = conditions(status)
    assert found["SpecValid"] == ("True", "Ok")
    assert found["VMProvisioned"] == ("False", "VMCreated")
    assert found["DatabaseHealthy"] == ("Unknown", "NotReached")
    assert found["Ready"] == ("False", "VMCreated")
    assert status.observed_generation == 2
    assert status.converged_generation == 1
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert ready.message == "vm: vm says VMCreated."


def test_a_transient_step_is_unknown() -> None:
    """A step that could not observe (Transient) reports Unknown rather than a guess."""
    status, _ = derive(
        DBInstanceStatus(), until("health", Outcome.TRANSIENT, "Unreachable"), now=T0
    )
    assert conditions(status)["DatabaseHealthy"] == ("Unknown", "Unreachable")


def test_transition_times_move_only_when_the_status_changes() -> None:
    """lastTransitionTime is kept across identical passes and moves on a change."""
    first, _ = derive(DBInstanceStatus(), converged(), now=T0)
    later = T0 + timedelta(minutes=5)
    second, _ = derive(first, converged(), now=later)
    assert [c.last_transition_time for c in second.conditions] == [T0] * len(second.conditions)
    third, _ = derive(second, until("health", Outcome.PENDING, "Booting"), now=later)
    times = {c.type: c.last_transition_time for c in third.conditions}
    assert (
        times["SpecValid"] == T0 and times["DatabaseHealthy"] == later and times["Ready"] == later
    )


def test_an_idle_pass_emits_no_event() -> None:
    """A pass that changes no condition emits no Event."""
    first, _ = derive(DBInstanceStatus(), converged(), now=T0)
    _, events = derive(first, converged(), now=T0 + timedelta(minutes=5))
    assert events == []


def test_a_transition_emits_one_event_per_changed_condition() -> None:
    """Health going Pending emits one Warning for Ready and one Normal for the step."""
    first, _ = derive(DBInstanceStatus(), converged(), now=T0)
    _, events = derive(first, until("health", Outcome.PENDING, "Booting"), now=T0)
    assert [(e.type, e.reason) for e in events] == [("Warning", "Booting"), ("Normal", "Booting")]
    assert events[1].message == "DatabaseHealthy: health says Booting."


def test_a_terminal_step_emits_a_warning() -> None:
    """A Terminal outcome is announced as a Warning Event naming the reason."""
    _, events = derive(
        DBInstanceStatus(), until("preflight", Outcome.TERMINAL, "UnknownImage"), now=T0
    )
    assert [(e.type, e.reason) for e in events] == [("Warning", "UnknownImage")]


def test_facts_fill_endpoint_and_observed_and_survive_passes_that_do_not_see_them() -> None:
    """The endpoint and observed facts come from steps, and stay when a pass stops earlier."""
    facts = Facts(endpoint_host="127.0.10.2", endpoint_port=5432, postgres_version="18.1")
    steps = [result(s.name, facts=facts if s.name == "health" else None) for s in STEPS]
    first, _ = derive(DBInstanceStatus(), report(*steps), now=T0)
    second, _ = derive(first, until("vm", Outcome.PENDING, "VMUpdated"), now=T0)
    third, _ = derive(second, report(*steps), now=T0)
    assert third.observed == second.observed
    assert second.endpoint is not None and (second.endpoint.host, second.endpoint.port) == (
        "127.0.10.2",
        5432,
    )
    assert second.observed is not None and second.observed.postgres_version == "18.1"


def test_deletion_is_reported_as_deleting() -> None:
    """While the teardown runs, Ready is False with reason Deleting and the phase says so."""
    teardown = PassReport(
        workflow_id="dbinstance/ns/db",
        generation=3,
        power_state=PowerState.RUNNING,
        deleting=True,
        pipeline=[s.reported for s in pipeline.TEARDOWN],
        results=[],
    )
    status, _ = derive(DBInstanceStatus(), teardown, now=T0)
    assert conditions(status)["Ready"] == ("False", "Deleting")
    assert status.phase is Phase.DELETING
    assert ConditionStatus.TRUE.value == conditions(status)["Reconciling"][0]


def test_a_paused_instance_says_so_and_holds_at_the_step_that_would_act() -> None:
    """dbi.dev/paused: a Paused condition, phase Paused where a step is held; a paused
    instance with nothing to do stays Ready (and Paused)."""
    held = report(
        result("preflight"), result("credentials"), result("vm", Outcome.PENDING, "Paused")
    ).model_copy(update={"paused": True})
    status, _ = derive(DBInstanceStatus(), held, now=T0)
    found = conditions(status)
    assert found["Paused"] == ("True", "Paused")
    assert found["Reconciling"] == ("True", "Paused")
    assert status.phase is Phase.PAUSED
    idle, _ = derive(status, converged().model_copy(update={"paused": True}), now=T0)
    assert conditions(idle)["Ready"] == ("True", "Converged")
    assert conditions(idle)["Paused"][0] == "True"
    resumed, _ = derive(idle, converged(), now=T0)
    assert "Paused" not in conditions(resumed)


def test_served_requests_accumulate_in_status() -> None:
    """status.served keeps each request's last served value; a pass that serves one
    request leaves the others' values as they were."""
    first = converged().model_copy(update={"served": Served(rotate_requested_at="a")})
    status, _ = derive(DBInstanceStatus(), first, now=T0)
    second = converged().model_copy(update={"served": Served(reconcile_requested_at="b")})
    status, _ = derive(status, second, now=T0)
    assert status.served == Served(rotate_requested_at="a", reconcile_requested_at="b")
    status, _ = derive(status, converged(), now=T0)
    assert status.served == Served(rotate_requested_at="a", reconcile_requested_at="b")


def test_a_held_step_is_what_keeps_the_instance_from_ready_and_later_steps_report() -> None:
    """A pass that went on past a held restart: Ready False for the held step, Reconciling,
    and the steps after it have their own conditions (not NotReached)."""
    names = [s.name for s in STEPS]
    after = [result(n) for n in names[names.index("resize") + 1 :]]
    status, _ = derive(DBInstanceStatus(), held_then(*after), now=T0)
    found = conditions(status)
    assert found["Ready"] == ("False", "MaintenanceWindow")
    assert found["Reconciling"] == ("True", "MaintenanceWindow")
    assert found["Stalled"][0] == "False"
    assert found["SizeSynced"] == ("False", "MaintenanceWindow")
    assert found["DatabaseHealthy"] == ("True", "Ok")
    assert status.phase is Phase.RESIZING


def test_a_later_step_that_ends_the_pass_blocks_before_a_held_one() -> None:
    """Held, then health Terminal: the Terminal one is what the instance waits on."""
    names = [s.name for s in STEPS]
    between = [result(n) for n in names[names.index("resize") + 1 : names.index("health")]]
    broken = result("health", Outcome.TERMINAL, "AdminPasswordRefused")
    pass_ = held_then(*between, broken)
    assert pass_.blocking == broken
    status, _ = derive(DBInstanceStatus(), pass_, now=T0)
    assert conditions(status)["Stalled"] == ("True", "AdminPasswordRefused")


def test_a_pass_with_no_results_is_not_ready() -> None:
    """A report whose steps all went unreported is not convergence: not Ready, still
    reconciling at the first step, every step Unknown, convergence kept as it was."""
    previous = DBInstanceStatus(converged_generation=1)
    empty = report(generation=2)
    summary = summarize(empty)
    assert (summary.ready, summary.step) == (False, STEPS[0].name)
    status, _ = derive(previous, empty, now=T0)
    found = conditions(status)
    assert found["Ready"] == ("False", "NotReached")
    assert found["Reconciling"][0] == "True"
    assert found["Stalled"][0] == "False"
    assert all(found[s.condition_type] == ("Unknown", "NotReached") for s in STEPS)
    assert status.converged_generation == 1
    assert status.phase is not Phase.RUNNING
