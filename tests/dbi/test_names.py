"""Names users and scripts rely on (plain data)."""

from __future__ import annotations

import pytest

from dbi import names


def test_a_workflow_id_names_its_instance() -> None:
    """An instance's workflow id parses back to its namespace and name."""
    assert names.instance_of(names.workflow_id("shop", "orders")) == ("shop", "orders")


@pytest.mark.parametrize("other", ["peer/shop/orders", "dbinstance/", "dbinstance/shop", ""])
def test_another_id_names_no_instance(other: str) -> None:
    assert names.instance_of(other) is None


def test_the_search_attributes_registered_are_the_ones_the_workflow_sets() -> None:
    """The registration table and the typed keys agree, DbiReady a Bool, the rest Keywords."""
    assert names.SEARCH_ATTRIBUTES == {
        "DbiNamespace": "Keyword",
        "DbiName": "Keyword",
        "DbiPhase": "Keyword",
        "DbiStep": "Keyword",
        "DbiReady": "Bool",
    }
