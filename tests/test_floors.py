"""The house plan, checked on the code: packages import only the floors below them, and
production code never imports the dev-only packages.

Floors, bottom up: ``dbi`` (what every part shares) ← ``activities`` (the steps) ←
``workflows`` (deterministic workflow code, the worker) ← ``watcher`` ← ``commands``
(the ``dbi`` command line). ``devstack`` and ``bench`` are dev-only: only ``dbi dev``
and ``dbi bench`` import them, lazily (inside the functions in commands/dev.py).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FLOORS = ["dbi", "activities", "workflows", "watcher", "commands"]
DEV_ONLY = {"devstack", "bench"}
PROJECT = {*FLOORS, *DEV_ONLY, "tests"}
LAZY_DEV_IMPORTS = {"commands/dev.py"}


def imports(path: Path) -> list[tuple[str, bool]]:
    """Return (top-level package, at module level) for each project import in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [node.module]
        else:
            continue
        for module in modules:
            package = module.split(".")[0]
            if package in PROJECT:
                found.append((package, id(node) in top_level))
    return found


def production_modules() -> list[Path]:
    return sorted(p for floor in FLOORS for p in (ROOT / floor).rglob("*.py"))


def violations() -> list[str]:
    problems = []
    for path in production_modules():
        where = path.relative_to(ROOT).as_posix()
        floor = FLOORS.index(where.split("/")[0])
        for package, module_level in imports(path):
            if package in DEV_ONLY:
                if module_level or where not in LAZY_DEV_IMPORTS:
                    problems.append(f"{where} imports dev-only {package}")
            elif package == "tests" or FLOORS.index(package) > floor:
                problems.append(f"{where} imports {package}, a floor above it")
    return problems


def test_every_package_imports_only_the_floors_below_it() -> None:
    """No import runs up a floor, and production code loads no dev-only package."""
    assert violations() == []


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        pytest.param("import workflows.worker\n", "a floor above it", id="up-a-floor"),
        pytest.param("from devstack import stack\n", "dev-only", id="dev-only"),
    ],
)
def test_the_check_finds_an_import_that_breaks_the_plan(
    tmp_path: Path, source: str, problem: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk sees a wrong import when there is one (so the check above can fail)."""
    module = ROOT / "dbi" / "_floor_probe.py"
    monkeypatch.setattr(sys.modules[__name__], "production_modules", lambda: [module])
    module.write_text(source)
    try:
        assert any(problem in v for v in violations())
    finally:
        module.unlink()


@pytest.mark.parametrize(
    ("process", "absent"),
    [
        pytest.param("watcher.__main__", {"activities", "workflows", "psycopg"}, id="watcher"),
        pytest.param("commands.main", {"devstack", "bench", "activities", "psycopg"}, id="cli"),
    ],
)
def test_a_process_loads_only_what_it_runs(process: str, absent: set[str]) -> None:
    """The watcher loads no step (nor psycopg, nor the workflow); the command line loads
    neither the dev-only packages nor the steps until a command needs them."""
    code = (
        f"import sys, importlib; importlib.import_module({process!r}); "
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    assert not [name for name in absent if f"'{name}'" in loaded], loaded
