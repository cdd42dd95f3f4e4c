"""Pass reports of plain data: converged, stopped at a step, held."""

from __future__ import annotations

from dbi import pipeline
from dbi.spec import PowerState
from dbi.status import PassReport
from dbi.steps import Facts, Outcome, StepResult

STEPS = [s.reported for s in pipeline.CONVERGE]


def result(
    step: str,
    outcome: Outcome = Outcome.SATISFIED,
    reason: str = "Ok",
    facts: Facts | None = None,
) -> StepResult:
    condition = next(s.condition_type for s in STEPS if s.name == step)
    return StepResult(
        step=step,
        outcome=outcome,
        condition_type=condition,
        reason=reason,
        message=f"{step} says {reason}.",
        facts=facts or Facts(),
    )


def report(
    *results: StepResult, generation: int = 2, power: PowerState = PowerState.RUNNING
) -> PassReport:
    return PassReport(
        workflow_id="dbinstance/ns/db",
        generation=generation,
        power_state=power,
        pipeline=STEPS,
        results=list(results),
    )


def converged(*, generation: int = 2, power: PowerState = PowerState.RUNNING) -> PassReport:
    return report(*(result(s.name) for s in STEPS), generation=generation, power=power)


def until(step: str, outcome: Outcome, reason: str) -> PassReport:
    names = [s.name for s in STEPS]
    ran = [result(n) for n in names[: names.index(step)]]
    return report(*ran, result(step, outcome, reason))


def held_then(*later: StepResult) -> PassReport:
    """A pass that went on past resize held for a window: every other step as given."""
    names = [s.name for s in STEPS]
    before = [result(n) for n in names[: names.index("resize")]]
    waiting = result("resize", Outcome.PENDING, "MaintenanceWindow").model_copy(
        update={"held": True}
    )
    return report(*before, waiting, *later)
