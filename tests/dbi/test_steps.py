"""The loop that runs a pass's steps in one activity (``dbi.steps.in_order``), with
plain data: it stops where the workflow's runner would, and names a step that raised."""

from __future__ import annotations

import pytest

from dbi import pipeline
from dbi.steps import Outcome, StepInput, StepResult, StepsInput, in_order

STEPS = tuple(s.name for s in pipeline.CONVERGE)
INPUT = StepInput(namespace="team-a", name="db", uid="uid-1")


def runner(
    outcomes: dict[str, Outcome], *, held: frozenset[str] = frozenset(), raises: str = ""
) -> tuple[list[str], object]:
    ran: list[str] = []

    def run(step: str, step_input: StepInput) -> StepResult:
        assert step_input == INPUT
        ran.append(step)
        if step == raises:
            raise RuntimeError("boom")
        spec = next(s for s in pipeline.CONVERGE if s.name == step)
        outcome = outcomes.get(step, Outcome.SATISFIED)
        return spec.result(outcome, "Scripted", "x", held=step in held)

    return ran, run


def test_every_step_runs_while_satisfied() -> None:
    ran, run = runner({})
    done = in_order(StepsInput(steps=STEPS, step_input=INPUT), run)  # type: ignore[arg-type]
    assert ran == list(STEPS)
    assert [r.step for r in done.results] == list(STEPS)
    assert done.raised is None


@pytest.mark.parametrize("outcome", [Outcome.PENDING, Outcome.TERMINAL, Outcome.TRANSIENT])
def test_the_first_step_not_satisfied_ends_it_with_its_result(outcome: Outcome) -> None:
    ran, run = runner({"vm": outcome})
    done = in_order(StepsInput(steps=STEPS, step_input=INPUT), run)  # type: ignore[arg-type]
    assert ran == ["preflight", "credentials", "vm"]
    assert done.results[-1].outcome is outcome
    assert done.raised is None


@pytest.mark.parametrize(("held", "last"), [(True, STEPS[-1]), (False, "resize")])
def test_a_held_step_is_passed_and_a_pending_one_ends_the_pass(held: bool, last: str) -> None:
    """A Pending result whose action waits (held: a window, an operator) lets the steps
    after it run; any other Pending result ends the pass."""
    ran, run = runner({"resize": Outcome.PENDING}, held=frozenset({"resize"} if held else ()))
    done = in_order(StepsInput(steps=STEPS, step_input=INPUT), run)  # type: ignore[arg-type]
    assert ran[-1] == last
    assert done.raised is None


def test_a_step_that_raises_ends_it_and_is_named_without_a_result() -> None:
    """The steps before it keep their results; the workflow goes on from the one named."""
    ran, run = runner({}, raises="health")
    done = in_order(StepsInput(steps=STEPS, step_input=INPUT), run)  # type: ignore[arg-type]
    assert ran == list(STEPS[: STEPS.index("health") + 1])
    assert [r.step for r in done.results] == list(STEPS[: STEPS.index("health")])
    assert done.raised == "health"
