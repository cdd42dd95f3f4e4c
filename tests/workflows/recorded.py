"""Where recorded histories go (``DBI_RECORD_HISTORIES=1``): the replay corpus,
``tests/workflows/histories/``, one new file per recording."""

from __future__ import annotations

from pathlib import Path

HISTORIES = Path(__file__).parent / "histories"


def history_path(slug: str) -> Path:
    """Return a new file for a history of ``slug``: never one already recorded, whose
    point is to stay as it was (``slug.json``, then ``slug-2.json``, ...)."""
    path, n = HISTORIES / f"{slug}.json", 1
    while path.exists():
        n += 1
        path = HISTORIES / f"{slug}-{n}.json"
    return path
