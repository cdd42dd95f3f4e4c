"""The tests mirror the code: a ``tests/<package>/`` for every package, and what tests
share lives in support modules (``tests/polling.py``, ``tests/activities/lifecycle.py``),
never in a ``test_*`` module another module imports (pytest would collect its tests
twice, and a helper's home would be a test's)."""

from __future__ import annotations

from pathlib import Path

from tests.modules import FLOORS, ROOT, imports_of

PACKAGES = [*FLOORS, "devstack", "bench"]


def test_the_check_finds_a_test_module_imported(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from tests.activities.test_vm import x\nimport tests.polling\n")
    assert imported_tests(probe) == ["tests.activities.test_vm"]


def imported_tests(path: Path) -> list[str]:
    """The ``test_*`` modules ``path`` imports."""
    found = []
    for module, taken, _ in imports_of(path):
        candidates = [module, *(f"{module}.{name}" for name in taken)]
        found += [m for m in candidates if m.startswith("tests.") and "test_" in m.split(".")[-1]]
    return found


def test_no_module_imports_a_test_module() -> None:
    found = {
        p.relative_to(ROOT).as_posix(): imported
        for p in sorted((ROOT / "tests").rglob("*.py"))
        if (imported := imported_tests(p))
    }
    assert found == {}


def test_every_package_has_its_room_in_tests() -> None:
    assert [p for p in PACKAGES if not (ROOT / "tests" / p / "__init__.py").exists()] == []
