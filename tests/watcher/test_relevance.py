"""Which events are worth a pass, with plain data (watcher/relevance.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dbi import names
from watcher.relevance import Seen, child_event_matters, instance_event_matters

T1, T2 = "2026-11-30T06:00:01Z", "2026-11-30T06:00:02Z"


def instance(generation: int, *, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "db", "namespace": "ns", "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = T2
    return {"metadata": meta}


def child(*writes: tuple[str, str]) -> dict[str, Any]:
    """A child whose managedFields hold (manager, time) entries."""
    fields = [{"manager": m, "operation": "Apply", "time": t} for m, t in writes]
    return {"metadata": {"name": "db", "namespace": "ns", "managedFields": fields}}


@pytest.mark.parametrize(
    ("event", "obj", "before", "matters"),
    [
        pytest.param("ADDED", instance(1), None, True, id="created"),
        pytest.param("SYNC", instance(1), Seen(1, False), True, id="relisted"),
        pytest.param("DELETED", instance(1), Seen(1, False), True, id="deleted"),
        pytest.param("MODIFIED", instance(2), Seen(1, False), True, id="spec-changed"),
        pytest.param("MODIFIED", instance(1), Seen(1, False), False, id="status-or-metadata-only"),
        pytest.param(
            "MODIFIED", instance(1, deleting=True), Seen(1, False), True, id="deletion-begun"
        ),
        pytest.param(
            "MODIFIED", instance(1, deleting=True), Seen(1, True), False, id="status-while-deleting"
        ),
        pytest.param("MODIFIED", instance(1), None, True, id="not-seen-before"),
    ],
)
def test_an_instance_event_matters_for_a_new_generation_or_deletion(
    event: str, obj: dict[str, Any], before: Seen | None, matters: bool
) -> None:
    assert instance_event_matters(event, obj, before) is matters


OURS, KUBEVIRT, KUBECTL = names.FIELD_MANAGER, "virt-controller", "kubectl-edit"


@pytest.mark.parametrize(
    ("event", "obj", "matters"),
    [
        pytest.param("ADDED", child((OURS, T1)), False, id="our-create"),
        pytest.param("MODIFIED", child((OURS, T2), (KUBEVIRT, T1)), False, id="our-latest-write"),
        pytest.param("MODIFIED", child((OURS, T1), (KUBEVIRT, T2)), True, id="kubevirt-status"),
        pytest.param("MODIFIED", child((OURS, T1), (KUBECTL, T2)), True, id="hand-edit"),
        pytest.param("MODIFIED", child((OURS, T2), (KUBECTL, T2)), True, id="same-second-tie"),
        pytest.param("DELETED", child((OURS, T1)), True, id="deleted-even-if-ours"),
        pytest.param("MODIFIED", child(), True, id="no-managed-fields"),
    ],
)
def test_a_child_event_matters_unless_the_newest_write_was_ours(
    event: str, obj: dict[str, Any], matters: bool
) -> None:
    assert child_event_matters(event, obj) is matters
