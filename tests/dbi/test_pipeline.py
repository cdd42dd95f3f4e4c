"""A step's decide says what it found one way: ``SPEC.satisfied``, ``pending``,
``transient`` or ``terminal`` (``dbi.pipeline.StepSpec``), never a result built by hand."""

from __future__ import annotations

import ast
import inspect

from activities.worker import registry
from dbi import pipeline
from dbi.steps import Decision, Outcome

SPEC = pipeline.VM


def test_each_of_the_four_results_carries_its_outcome_hint_action_and_facts() -> None:
    done = SPEC.satisfied("Provisioned", "done", address="127.10.0.2")
    assert (done.result.outcome, done.action, done.result.facts.address) == (
        Outcome.SATISFIED,
        None,
        "127.10.0.2",
    )
    acting = SPEC.pending("Created", "created", "create", after=0.0)
    assert (acting.result.outcome, acting.action) == (Outcome.PENDING, "create")
    assert acting.result.requeue_after_seconds == 0.0
    assert (acting.result.step, acting.result.condition_type) == ("vm", "VMProvisioned")
    held: Decision[str] = SPEC.pending("Window", "waits", after=60, held=True, announced=True)
    assert (held.action, held.result.held, held.result.announced) == (None, True, True)
    retry = SPEC.transient("Unreachable", "no answer", after=5)
    assert (retry.result.outcome, retry.result.requeue_after_seconds) == (Outcome.TRANSIENT, 5)
    stuck = SPEC.terminal("Invalid", "spec.x is wrong")
    assert (stuck.result.outcome, stuck.result.reason, stuck.action) == (
        Outcome.TERMINAL,
        "Invalid",
        None,
    )


def _built_by_hand(source: str) -> list[str]:
    """The calls in ``source`` that build a step's result other than the four ways."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("Decision", "Verdict", "StepResult"):
            found.append(f"line {node.lineno}: {func.id}(...)")
        if isinstance(func, ast.Attribute) and func.attr == "result":
            found.append(f"line {node.lineno}: .result(...)")
    return found


def test_no_step_builds_its_result_by_hand() -> None:
    by_hand = {
        module.__name__: found
        for module in registry.MODULES
        if (found := _built_by_hand(inspect.getsource(module)))
    }
    assert by_hand == {}


def test_the_check_finds_a_result_built_by_hand() -> None:
    source = "def decide(obs):\n    return Decision(SPEC.result(Outcome.SATISFIED, 'A', 'a'))\n"
    assert _built_by_hand(source) == ["line 2: Decision(...)", "line 2: .result(...)"]
