"""The repository's production modules, floor by floor."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


FLOORS = ["dbi", "activities", "workflows", "watcher", "commands"]


def production_modules() -> list[Path]:
    return sorted(p for floor in FLOORS for p in (ROOT / floor).rglob("*.py"))
