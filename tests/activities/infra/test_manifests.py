"""The children as dbi wants them, and how they are compared (plain data)."""

from __future__ import annotations

from activities.infra import manifests


def test_covers_compares_lists_exactly() -> None:
    """A volume list with a different length is drift, even if it starts the same."""
    assert not manifests.covers({"v": [1]}, {"v": [1, 2]})
    assert manifests.covers({"v": [{"a": 1}]}, {"v": [{"a": 1, "b": 2}]})
