"""Each name typed once: a step's name and its condition are written in the step table
(dbi/pipeline.py) and read from there everywhere else in production code."""

from __future__ import annotations

import ast
from pathlib import Path

from dbi import pipeline
from tests.modules import ROOT, production_modules

TABLE = ROOT / "dbi" / "pipeline.py"
IDENTITIES = {
    text
    for spec in (
        *pipeline.CONVERGE,
        *pipeline.TEARDOWN,
        *pipeline.DATABASE,
        *pipeline.DATABASE_TEARDOWN,
        *pipeline.ROLE,
        *pipeline.ROLE_TEARDOWN,
    )
    for text in (spec.name, spec.condition_type)
}


def _command_names(tree: ast.AST) -> set[int]:
    """The ids of string constants that name a command-line subcommand (``add_parser``):
    ``dbi resize`` is a command, not the resize step."""
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "add_parser"
            and node.args
        ):
            found.add(id(node.args[0]))
    return found


def literals(path: Path) -> list[str]:
    """Return the step names and condition types ``path`` writes as string literals."""
    tree = ast.parse(path.read_text(), filename=str(path))
    commands = _command_names(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in IDENTITIES and id(node) not in commands
    ]


# The guest program reads the bootstrap document, whose field names (``upgrade``) are its
# contract with an image (docs/guest.md), not the orchestrator's step table.
GUEST = ROOT / "guest"


def test_a_steps_name_and_condition_are_written_only_in_the_step_table() -> None:
    """No production module but the step table writes a step's name or condition."""
    found = [
        hit
        for path in production_modules()
        if path != TABLE and GUEST not in path.parents
        for hit in literals(path)
    ]
    assert found == []


def test_the_check_finds_a_step_name_written_elsewhere(tmp_path: Path) -> None:
    """The scan sees a step name typed as a literal (so the check above can fail)."""
    probe = ROOT / "activities" / "_single_source_probe.py"
    probe.write_text('STEP, CONDITION = "health", "DatabaseHealthy"\n')
    try:
        assert len(literals(probe)) == 2
    finally:
        probe.unlink()
