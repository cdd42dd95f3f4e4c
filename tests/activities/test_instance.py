"""load_instance's reading of the day-2 annotations (plain data)."""

from __future__ import annotations

from typing import Any

import pytest

from activities.instance import paused, unserved
from activities.kube import Instance
from dbi import names
from dbi.models import DBInstance, Served


def instance(annotations: dict[str, str], served: dict[str, str] | None = None) -> Instance:
    body: dict[str, Any] = {
        "metadata": {"name": "db", "namespace": "shop", "annotations": annotations},
        "spec": {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}},
    }
    if served is not None:
        body["status"] = {"served": served}
    return Instance(
        model=DBInstance.model_validate(body), uid="u", generation=1, deleting=False, finalizers=()
    )


def test_a_request_is_unserved_until_its_value_is_served() -> None:
    """Each *-requested-at value is served once: a new value is a new request, the value
    status.served shows is not asked again, and an empty value asks nothing."""
    annotations = {
        names.ROTATE_REQUESTED_AT: "2026-12-01T08:00:00Z",
        names.RESTART_REQUESTED_AT: "2",
        names.RECONCILE_REQUESTED_AT: "",
    }
    assert unserved(instance(annotations)) == Served(
        rotate_requested_at="2026-12-01T08:00:00Z", restart_requested_at="2"
    )
    served = {"rotateRequestedAt": "2026-12-01T08:00:00Z", "restartRequestedAt": "1"}
    assert unserved(instance(annotations, served)) == Served(restart_requested_at="2")
    assert unserved(instance({})) == Served()


@pytest.mark.parametrize(
    ("value", "held"),
    [("true", True), ("True", True), (" true ", True), ("false", False), ("yes", False)],
)
def test_paused_is_the_value_true(value: str, held: bool) -> None:
    assert paused(instance({names.PAUSED_ANNOTATION: value})) is held
