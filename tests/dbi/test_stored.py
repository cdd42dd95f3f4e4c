"""What a load and a wake make of a stored DBInstance (plain data)."""

from __future__ import annotations

from typing import Any

import pytest

from dbi import names
from dbi.models import DBInstance, Served
from dbi.spec import PowerState
from dbi.steps import InstanceSnapshot
from dbi.stored import paused, seen, unserved

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}


def stored(
    annotations: dict[str, str] | None = None,
    served: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {
            "name": "db",
            "namespace": "shop",
            "uid": "u-1",
            "generation": 3,
            "annotations": annotations or {},
        },
        "spec": {**SPEC, **spec},
    }
    if served is not None:
        body["status"] = {"served": served}
    return body


def model(annotations: dict[str, str], served: dict[str, str] | None = None) -> DBInstance:
    return DBInstance.model_validate(stored(annotations, served))


def test_a_request_is_unserved_until_its_value_is_served() -> None:
    """Each *-requested-at value is served once: a new value is a new request, the value
    status.served shows is not asked again, and an empty value asks nothing."""
    annotations = {
        names.ROTATE_REQUESTED_AT: "2026-12-01T08:00:00Z",
        names.RESTART_REQUESTED_AT: "2",
        names.RECONCILE_REQUESTED_AT: "",
    }
    assert unserved(model(annotations)) == Served(
        rotate_requested_at="2026-12-01T08:00:00Z", restart_requested_at="2"
    )
    served = {"rotateRequestedAt": "2026-12-01T08:00:00Z", "restartRequestedAt": "1"}
    assert unserved(model(annotations, served)) == Served(restart_requested_at="2")
    assert unserved(model({})) == Served()


@pytest.mark.parametrize(
    ("value", "held"),
    [("true", True), ("True", True), (" true ", True), ("false", False), ("yes", False)],
)
def test_paused_is_the_value_true(value: str, held: bool) -> None:
    assert paused(model({names.PAUSED_ANNOTATION: value})) is held


def test_a_watched_object_is_seen_as_a_load_finds_it() -> None:
    """What a wake carries of the instance: its identity, the spec fields a pass turns on
    and what it asks; a plain new instance is the snapshot a load of it returns."""
    assert seen(stored()) == InstanceSnapshot(exists=True, uid="u-1", generation=3)
    asked = stored(
        {names.PAUSED_ANNOTATION: "true", names.BACKUP_REQUESTED_AT: "b1"},
        powerState="Stopped",
        healthCheckInterval="1m",
    )
    asked["metadata"]["deletionTimestamp"] = "2026-12-05T10:00:00Z"
    assert seen(asked) == InstanceSnapshot(
        exists=True,
        uid="u-1",
        generation=3,
        deleting=True,
        power_state=PowerState.STOPPED,
        health_check_interval_seconds=60.0,
        paused=True,
        unserved=Served(backup_requested_at="b1"),
    )


def test_a_spec_the_models_cannot_read_is_seen_with_the_stand_in() -> None:
    """A spec this version cannot read does not fail the watcher: it is seen as the
    worker's load reads it, with the stand-in spec."""
    bad = stored(resources={"cpu": "lots"})
    assert seen(bad) == InstanceSnapshot(exists=True, uid="u-1", generation=3)
