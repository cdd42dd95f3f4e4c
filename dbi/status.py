"""Derive a DBInstance's status from one pass, and the Events its transitions deserve.

Pure functions of plain data: the workflow uses ``summarize`` (phase, readiness,
current step) for its search attributes and the Temporal UI; the status activity
uses ``derive`` to merge a pass into the status it read from the object, keeping
``lastTransitionTime`` where a condition did not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict

from dbi import restoretest
from dbi.models import (
    Condition,
    ConditionStatus,
    DBInstanceStatus,
    Endpoint,
    Observed,
    Phase,
    Served,
)
from dbi.pipeline import POWER, REPLICATED, TEARDOWN
from dbi.spec import PowerState
from dbi.steps import (
    PAUSED,
    Facts,
    Outcome,
    PipelineStep,
    StepResult,
)


class Reason(StrEnum):
    """Reasons of the conditions that summarize the steps (Ready, Reconciling, Stalled)."""

    CONVERGED = "Converged"
    DELETING = "Deleting"
    NOT_REACHED = "NotReached"


READY = "Ready"
RECONCILING = "Reconciling"
STALLED = "Stalled"
# Present only while dbi.dev/paused holds the instance's actions.
PAUSED_CONDITION = "Paused"

# The phase people see while a step is Pending, by step (the step table says).
_PENDING_PHASE = {spec.name: spec.pending_phase for spec in (*REPLICATED, *TEARDOWN)}


class PassReport(BaseModel):
    """One pass as the workflow saw it: the steps it meant to run and what they returned."""

    model_config = ConfigDict(frozen=True)

    workflow_id: str
    generation: int
    power_state: PowerState
    deleting: bool = False
    pipeline: list[PipelineStep]
    results: list[StepResult]
    paused: bool = False
    served: Served | None = None

    @property
    def converged(self) -> bool:
        """Tell whether every step of the pipeline ran and was Satisfied."""
        return len(self.results) == len(self.pipeline) and all(
            r.outcome is Outcome.SATISFIED for r in self.results
        )

    @property
    def outcome(self) -> str:
        """``Converged``, or the outcome of the step that ended the pass (for metrics)."""
        blocking = self.blocking
        return "Converged" if blocking is None else blocking.outcome.value

    @property
    def blocking(self) -> StepResult | None:
        """Return the result that keeps the instance from converging, if one does: the
        one that ended the pass, else the first held one (a pass goes on past those).
        A pass that reported no step is not converged: its first step blocks, not reached."""
        if self.converged:
            return None
        if not self.results:
            first = self.pipeline[0]
            return StepResult(
                step=first.name,
                outcome=Outcome.PENDING,
                condition_type=first.condition_type,
                reason=Reason.NOT_REACHED,
                message="No step reported in this pass.",
            )
        unsettled = [r for r in self.results if r.outcome is not Outcome.SATISFIED]
        ended = [r for r in unsettled if not r.held]
        if ended:
            return ended[0]
        return unsettled[0] if unsettled else self.results[-1]


class Summary(BaseModel):
    """The few facts the workflow shows in search attributes and the Temporal UI."""

    model_config = ConfigDict(frozen=True)

    phase: Phase
    ready: bool
    step: str
    outcome: Outcome


class Event(BaseModel):
    """A Kubernetes Event to emit: for a condition transition, or an action a step took."""

    model_config = ConfigDict(frozen=True)

    type: str
    reason: str
    message: str


def summarize(report: PassReport) -> Summary:
    """Return the phase, readiness, current step and overall outcome of a pass."""
    blocking = report.blocking
    if blocking is None:
        done = Phase.STOPPED if report.power_state is PowerState.STOPPED else Phase.RUNNING
        phase = Phase.DELETING if report.deleting else done
        return Summary(phase=phase, ready=not report.deleting, step="", outcome=Outcome.SATISFIED)
    return Summary(
        phase=_phase(report, blocking),
        ready=False,
        step=blocking.step,
        outcome=blocking.outcome,
    )


def _phase(report: PassReport, blocking: StepResult) -> Phase:
    if report.deleting:
        return Phase.DELETING
    if blocking.outcome is Outcome.TERMINAL:
        return Phase.FAILED
    if blocking.outcome is Outcome.TRANSIENT:
        return Phase.DEGRADED
    if blocking.reason == PAUSED:
        return Phase.PAUSED
    if blocking.step == POWER.name:
        return Phase.STOPPING if report.power_state is PowerState.STOPPED else Phase.STARTING
    return _PENDING_PHASE.get(blocking.step, Phase.PROVISIONING)


def derive(
    previous: DBInstanceStatus, report: PassReport, *, now: datetime
) -> tuple[DBInstanceStatus, list[Event]]:
    """Return the status after ``report``, and the Events for conditions that changed.

    Steps the pass did not reach are written Unknown (``NotReached``): "healthy" and
    "not checked" must look different. Events go out only for a condition whose status
    or reason changed to True or False, so an idle pass emits none. The status and
    every condition carry the generation the pass read (``observedGeneration``), as
    kstatus reads them; ``convergedGeneration`` is the last one every step satisfied.
    """
    tested = restoretest.conditions(None if report.deleting else previous.restore_test, now)
    merged, events = conditions_of(previous.conditions, report, now=now, tail=tested)
    facts = Facts()
    for result in report.results:
        facts = result.facts.merged_over(facts)
    status = DBInstanceStatus(
        phase=summarize(report).phase,
        conditions=merged,
        observed_generation=report.generation,
        converged_generation=(
            report.generation if report.converged else previous.converged_generation
        ),
        endpoint=_endpoint(facts) or previous.endpoint,
        credentials_secret_name=facts.credentials_secret_name or previous.credentials_secret_name,
        observed=_observed(facts, previous.observed),
        primary=facts.primary or previous.primary,
        members=previous.members if facts.members is None else list(facts.members),
        workflow_id=report.workflow_id,
        served=report.served.merged_over(previous.served) if report.served else previous.served,
    )
    return status, events


def _condition(
    type_: str, status: ConditionStatus, reason: str, message: str, now: datetime
) -> Condition:
    return Condition(
        type=type_, status=status, reason=reason, message=message, last_transition_time=now
    )


def conditions_of(
    previous: list[Condition],
    report: PassReport,
    *,
    now: datetime,
    what: str = "instance",
    tail: Sequence[Condition] = (),
) -> tuple[list[Condition], list[Event]]:
    """Return the conditions of any kind's object after ``report`` (Ready, Reconciling,
    Stalled, Paused while paused, one per step, then ``tail``), and the Events for those
    that changed; ``what`` names the object in the deleting message."""
    found = (
        *_summary_conditions(report, now, what),
        *_paused_condition(report, now),
        *_step_conditions(report, now),
        *tail,
    )
    conditions = [c.model_copy(update={"observed_generation": report.generation}) for c in found]
    before = {c.type: c for c in previous}
    merged = [_keep_transition_time(c, before.get(c.type)) for c in conditions]
    return merged, _events(merged, before, report)


def _summary_conditions(
    report: PassReport, now: datetime, what: str = "instance"
) -> list[Condition]:
    blocking = report.blocking
    true, false = ConditionStatus.TRUE, ConditionStatus.FALSE
    if report.deleting:
        msg = f"The {what} is being deleted."
        return [
            _condition(READY, false, Reason.DELETING, msg, now),
            _condition(RECONCILING, true, Reason.DELETING, msg, now),
            _condition(STALLED, false, Reason.DELETING, msg, now),
        ]
    if blocking is None:
        msg = "Every step is satisfied."
        return [
            _condition(READY, true, Reason.CONVERGED, msg, now),
            _condition(RECONCILING, false, Reason.CONVERGED, msg, now),
            _condition(STALLED, false, Reason.CONVERGED, msg, now),
        ]
    msg = f"{blocking.step}: {blocking.message}"
    stalled = blocking.outcome is Outcome.TERMINAL
    return [
        _condition(READY, false, blocking.reason, msg, now),
        _condition(RECONCILING, false if stalled else true, blocking.reason, msg, now),
        _condition(STALLED, true if stalled else false, blocking.reason, msg, now),
    ]


def _paused_condition(report: PassReport, now: datetime) -> list[Condition]:
    if not report.paused or report.deleting:
        return []
    message = "dbi.dev/paused is true: steps observe and report, and take no action."
    return [_condition(PAUSED_CONDITION, ConditionStatus.TRUE, PAUSED, message, now)]


_STATUS_OF = {
    Outcome.SATISFIED: ConditionStatus.TRUE,
    Outcome.PENDING: ConditionStatus.FALSE,
    Outcome.TERMINAL: ConditionStatus.FALSE,
    Outcome.TRANSIENT: ConditionStatus.UNKNOWN,
}


def _step_conditions(report: PassReport, now: datetime) -> list[Condition]:
    ran = {r.step: r for r in report.results}
    blocking = report.blocking
    conditions = []
    for step in report.pipeline:
        result = ran.get(step.name)
        if result is not None:
            status = _STATUS_OF[result.outcome]
            conditions.append(
                _condition(step.condition_type, status, result.reason, result.message, now)
            )
        else:
            waiting_for = blocking.step if blocking is not None else "an earlier step"
            message = f"Not checked in the last pass: waiting for {waiting_for}."
            conditions.append(
                _condition(
                    step.condition_type, ConditionStatus.UNKNOWN, Reason.NOT_REACHED, message, now
                )
            )
    return conditions


def _keep_transition_time(new: Condition, old: Condition | None) -> Condition:
    if old is None or old.status != new.status:
        return new
    return new.model_copy(update={"last_transition_time": old.last_transition_time})


def _events(
    conditions: list[Condition], before: dict[str, Condition], report: PassReport
) -> list[Event]:
    outcome_of = {r.condition_type: r.outcome for r in report.results}
    events = []
    for c in conditions:
        old = before.get(c.type)
        if _deserves_event(c, old):
            bad = outcome_of.get(c.type) in (Outcome.TERMINAL, Outcome.TRANSIENT) or (
                c.type in (READY, restoretest.CONDITION) and c.status is ConditionStatus.FALSE
            )
            events.append(
                Event(
                    type="Warning" if bad else "Normal",
                    reason=c.reason,
                    message=f"{c.type}: {c.message}",
                )
            )
    return events


def _deserves_event(new: Condition, old: Condition | None) -> bool:
    """Tell whether a condition changed in a way people should hear about.

    Unknown states and the kstatus conditions are not news; Ready is news when it
    becomes True, and when it stops being True.
    """
    if old is not None and (old.status, old.reason) == (new.status, new.reason):
        return False
    if new.type in (RECONCILING, STALLED) or new.status is ConditionStatus.UNKNOWN:
        return False
    if new.type == READY and new.status is ConditionStatus.FALSE:
        return old is not None and old.status is ConditionStatus.TRUE
    return True


def _endpoint(facts: Facts) -> Endpoint | None:
    if facts.endpoint_host is None or facts.endpoint_port is None:
        return None
    return Endpoint(host=facts.endpoint_host, port=facts.endpoint_port)


def _observed(facts: Facts, previous: Observed | None) -> Observed | None:
    seen = {
        "cpu": facts.cpu,
        "memory": facts.memory,
        "storage": facts.storage,
        "power_state": facts.power_state,
        "postgres_version": facts.postgres_version,
        "image": facts.image,
        "address": facts.address,
        "parameters": None if facts.parameters is None else list(facts.parameters),
        "pending_restart": None if facts.pending_restart is None else list(facts.pending_restart),
    }
    fresh = {k: v for k, v in seen.items() if v is not None}
    if not fresh:
        return previous
    return (previous or Observed()).model_copy(update=fresh)
