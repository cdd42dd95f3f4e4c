"""The Argo CD health script on statuses as dbi writes them (plain data, real Lua)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.gitops.tools import argo_health


def db(status: dict[str, Any] | None, *, generation: int = 2, **metadata: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "dbi.dev/v1alpha1",
        "kind": "DBInstance",
        "metadata": {"name": "db", "namespace": "shop", "generation": generation, **metadata},
        "spec": {},
    }
    if status is not None:
        obj["status"] = status
    return obj


def conditions(phase: str, **held: str) -> dict[str, Any]:
    return {
        "observedGeneration": 2,
        "phase": phase,
        "conditions": [
            {"type": t, "status": s, "reason": "Why", "message": f"{t} says {s}."}
            for t, s in held.items()
        ],
    }


@pytest.mark.parametrize(
    ("obj", "health"),
    [
        pytest.param(db(None), "Progressing", id="no-status"),
        pytest.param(db({"observedGeneration": 0}), "Progressing", id="created"),
        pytest.param(
            db({**conditions("Running", Ready="True"), "observedGeneration": 1}),
            "Progressing",
            id="ready-at-an-older-generation",
        ),
        pytest.param(db(conditions("Running", Ready="True")), "Healthy", id="ready"),
        pytest.param(
            db(conditions("Failed", Ready="False", Stalled="True")), "Degraded", id="stalled"
        ),
        pytest.param(
            db(conditions("Degraded", Ready="False", Reconciling="True")),
            "Degraded",
            id="transient",
        ),
        pytest.param(
            db(conditions("Provisioning", Ready="False", Reconciling="True")),
            "Progressing",
            id="provisioning",
        ),
        pytest.param(db(conditions("Stopped", Ready="True")), "Suspended", id="stopped"),
        pytest.param(
            db(conditions("Paused", Ready="False", Reconciling="True", Paused="True")),
            "Suspended",
            id="paused",
        ),
        pytest.param(
            db(conditions("Running", Ready="True"), deletionTimestamp="2026-12-01T00:00:00Z"),
            "Progressing",
            id="deleting",
        ),
    ],
)
def test_argo_cd_health(obj: dict[str, Any], health: str) -> None:
    assert argo_health(obj)[0] == health


def database(**held: str) -> dict[str, Any]:
    """A DBDatabase as dbi writes its status: conditions, no phase."""
    status = conditions("", **held)
    del status["phase"]
    return {**db(status), "kind": "DBDatabase"}


@pytest.mark.parametrize(
    ("obj", "health"),
    [
        pytest.param(database(Ready="True"), "Healthy", id="ready"),
        pytest.param(database(Ready="False", Stalled="True"), "Degraded", id="stalled"),
        pytest.param(database(Ready="False", Reconciling="True"), "Progressing", id="waiting"),
    ],
)
def test_argo_cd_health_of_a_database(obj: dict[str, Any], health: str) -> None:
    """The same script serves DBDatabase (resource.customizations.health.dbi.dev_DBDatabase)."""
    assert argo_health(obj)[0] == health
