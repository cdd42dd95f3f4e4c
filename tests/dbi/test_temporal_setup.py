"""What `dbi temporal setup` finds on a namespace (plain data)."""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType

from dbi import names
from dbi.temporal_setup import compare

ATTRIBUTES = list(names.SEARCH_ATTRIBUTES)


def test_an_attribute_of_another_type_is_a_conflict_named() -> None:
    """A namespace where DbiReady is a Keyword (another tool's): named, not overwritten."""
    keyword = IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD
    existing = dict.fromkeys(ATTRIBUTES, keyword)
    missing, wrong = compare(existing)
    assert missing == []
    assert wrong == ["DbiReady is Keyword, dbi needs Bool"]
    missing, wrong = compare({})
    assert missing == [f"{key} ({kind.value})" for key, kind in names.SEARCH_ATTRIBUTES.items()]
