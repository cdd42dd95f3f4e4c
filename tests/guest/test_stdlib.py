"""The guest program runs on the image's own Python: it imports the standard library
and itself, nothing else (no pydantic, no dbi)."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.modules import ROOT, imports_of


def foreign_imports(paths: list[Path]) -> list[str]:
    """The imports in ``paths`` of neither the standard library nor ``guest``."""
    return sorted(
        f"{p.relative_to(ROOT).as_posix()}: {module}"
        for p in paths
        for module, _, _ in imports_of(p)
        if module.split(".")[0] not in {*sys.stdlib_module_names, "guest", "__future__"}
    )


def test_the_guest_program_imports_the_standard_library_only() -> None:
    modules = sorted((ROOT / "guest").rglob("*.py"))
    assert len(modules) >= 4
    assert foreign_imports(modules) == []


def test_the_check_finds_a_library_the_image_may_not_have(tmp_path: Path) -> None:
    probe = ROOT / "guest" / "_probe.py"
    probe.write_text("import json\nfrom pydantic import BaseModel\nfrom dbi import names\n")
    try:
        assert foreign_imports([probe]) == [
            "guest/_probe.py: dbi",
            "guest/_probe.py: pydantic",
        ]
    finally:
        probe.unlink()
