"""docs/steps.md lists exactly the steps, conditions and reasons the code uses."""

from __future__ import annotations

from pathlib import Path

from activities.worker import reference


def test_the_reference_table_matches_the_code(repo_root: Path) -> None:
    """The table in docs/steps.md is the one rendered from the steps' Reason enums."""
    text = (repo_root / "docs" / "steps.md").read_text()
    assert reference.replace_in(text) == text, "run: python -m activities.worker.reference"
