"""The house plan, checked on the code: packages import only the floors below them, and
production code never imports the dev-only packages.

Floors, bottom up: ``guest`` (the program inside each VM: standard library only) ←
``dbi`` (what every part shares) ← ``activities`` (the steps) ←
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

from tests.modules import FLOORS, ROOT, imports_of, production_modules

DEV_ONLY = {"devstack", "bench"}
PROJECT = {*FLOORS, *DEV_ONLY, "tests"}
LAZY_DEV_IMPORTS = {"commands/dev.py"}


def imports(path: Path) -> list[tuple[str, bool]]:
    """Return (top-level package, at module level) for each project import in ``path``."""
    return [
        (module.split(".")[0], top)
        for module, _, top in imports_of(path)
        if module.split(".")[0] in PROJECT
    ]


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


def step_modules() -> set[str]:
    """The modules of ``activities.steps`` that are steps: those that define ``STEP``."""
    return {
        p.stem
        for p in (ROOT / "activities" / "steps").glob("*.py")
        if any(
            isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "STEP" for t in n.targets)
            for n in ast.parse(p.read_text()).body
        )
    }


def step_imports(path: Path, steps: set[str]) -> set[str]:
    """The steps ``path`` imports, itself left out."""
    found: set[str] = set()
    for module, taken, _ in imports_of(path):
        if module == "activities.steps":
            found |= set(taken)
        elif module.startswith("activities.steps."):
            found.add(module.removeprefix("activities.steps.").split(".")[0])
    return (found & steps) - {path.stem}


def test_no_step_imports_another_step() -> None:
    """What two steps share lives below them (``activities.infra.machine``, ``volumes``,
    ``scrape``, ``addresses``, ...): a step is read, changed and tested alone."""
    steps = step_modules()
    assert {"vm", "power", "health", "teardown_vm"} <= steps
    found = {
        name: sorted(imported)
        for name in sorted(steps)
        if (imported := step_imports(ROOT / "activities" / "steps" / f"{name}.py", steps))
    }
    assert found == {}


def test_the_check_finds_a_step_importing_a_step(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text(
        "from activities.steps import vm\nfrom activities.steps.power import Reason\n"
    )
    assert step_imports(module, step_modules()) == {"vm", "power"}


# The rooms of ``activities``, bottom up: how activities reach the world; the steps; the
# steps of the other kinds (a DBDatabase's, on the steps' loop); the operations beside
# convergence (a backup, an upgrade, a rotation); the worker's machinery.
ROOMS = ["infra", "steps", "objects", "operations", "worker"]


def room_violations(paths: list[Path]) -> list[str]:
    """Imports in ``activities`` that run up a room (``activities.infra`` importing a
    step, a step importing the worker, ...)."""
    problems = []
    for path in paths:
        parts = path.relative_to(ROOT / "activities").parts
        if len(parts) < 2:
            problems.append(f"activities/{parts[0]}: outside every room")
            continue
        room = ROOMS.index(parts[0])
        for module, _, _ in imports_of(path):
            names = module.split(".")
            up = names[0] == "activities" and len(names) > 1 and names[1] in ROOMS
            if up and ROOMS.index(names[1]) > room:
                problems.append(f"activities/{'/'.join(parts)} imports {module}")
    return problems


def test_every_activity_module_lives_in_a_room_and_imports_only_rooms_below() -> None:
    modules = [p for p in (ROOT / "activities").rglob("*.py") if p.name != "__init__.py"]
    assert {p.relative_to(ROOT / "activities").parts[0] for p in modules} == set(ROOMS)
    assert room_violations(modules) == []


def test_the_check_finds_an_import_up_a_room(tmp_path: Path) -> None:
    probe = ROOT / "activities" / "infra" / "_room_probe.py"
    probe.write_text("from activities.steps import vm\nfrom activities.infra import kube\n")
    try:
        assert room_violations([probe]) == [
            "activities/infra/_room_probe.py imports activities.steps"
        ]
    finally:
        probe.unlink()
