"""No production module grows past what one reader holds in mind: LIMIT lines. A module
that would is split by what its parts do (as dbi/spec.py became spec, fields,
backup_spec and maintenance)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCTION = ("guest", "dbi", "activities", "workflows", "watcher", "commands")
LIMIT = 350


def sizes() -> dict[str, int]:
    return {
        p.relative_to(ROOT).as_posix(): len(p.read_text().splitlines())
        for package in PRODUCTION
        for p in (ROOT / package).rglob("*.py")
    }


def problems(found: dict[str, int]) -> list[str]:
    return [
        f"{module}: {lines} lines, over {LIMIT}"
        for module, lines in sorted(found.items())
        if lines > LIMIT
    ]


def test_no_production_module_grows_past_the_limit() -> None:
    assert problems(sizes()) == []


def test_the_check_finds_a_module_too_long() -> None:
    found = {"dbi/new.py": LIMIT + 1, "dbi/steps.py": LIMIT}
    assert problems(found) == [f"dbi/new.py: {LIMIT + 1} lines, over {LIMIT}"]
    assert "workflows/dbinstance.py" in sizes()  # the walk sees the modules
