"""The repository's production modules, floor by floor."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


FLOORS = ["guest", "dbi", "images", "activities", "workflows", "watcher", "commands"]


def production_modules() -> list[Path]:
    return sorted(p for floor in FLOORS for p in (ROOT / floor).rglob("*.py"))


def imports_of(path: Path) -> Iterator[tuple[str, tuple[str, ...], bool]]:
    """Each absolute import in ``path``: the module, the names taken from it (none for
    ``import x``), and whether the import is at module level."""
    tree = ast.parse(path.read_text(), filename=str(path))
    top_level = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, (), id(node) in top_level
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module, tuple(a.name for a in node.names), id(node) in top_level
