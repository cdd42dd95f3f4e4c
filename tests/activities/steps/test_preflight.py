"""preflight's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any, cast

import pytest

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps import preflight
from dbi.config import Config
from dbi.models import DBInstance
from dbi.steps import Outcome, StepInput

GI = Decimal(2**30)


PRE = preflight.Observation(
    version=18,
    image="dbi-images/postgres-18",
    image_exists=True,
    storage=10 * GI,
    disk_request=None,
    has_finalizer=True,
)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(PRE, Outcome.SATISFIED, "SpecValid", id="valid"),
        pytest.param(
            replace(PRE, has_finalizer=False),
            Outcome.PENDING,
            "FinalizerAdded",
            id="adds-finalizer",
        ),
        pytest.param(
            replace(
                PRE,
                image="team-b/their-image",
                image_namespaces=frozenset({"dbi-images"}),
                image_exists=False,
            ),
            Outcome.TERMINAL,
            "ImageNotAllowed",
            id="another-tenants-image-is-refused-unread",
        ),
        pytest.param(
            replace(PRE, image_namespaces=frozenset({"dbi-images"})),
            Outcome.SATISFIED,
            "SpecValid",
            id="an-image-of-the-operators-namespaces",
        ),
        pytest.param(
            replace(PRE, image=None),
            Outcome.TERMINAL,
            "UnsupportedVersion",
            id="no-image-for-version",
        ),
        pytest.param(
            replace(PRE, image_exists=False), Outcome.TERMINAL, "ImageNotFound", id="unknown-image"
        ),
        pytest.param(
            replace(PRE, image_version="16.15.0"),
            Outcome.TERMINAL,
            "ImageVersionMismatch",
            id="image-of-another-major",
        ),
        pytest.param(
            replace(PRE, image_version="18.3.0"), Outcome.SATISFIED, "SpecValid", id="same-major"
        ),
        pytest.param(
            replace(PRE, image_version="1.0"),
            Outcome.TERMINAL,
            "ImageVersionMismatch",
            id="major-1-is-not-18",
        ),
        pytest.param(
            replace(PRE, disk_request=20 * GI),
            Outcome.TERMINAL,
            "StorageBelowCapacity",
            id="below-capacity",
        ),
        pytest.param(
            replace(PRE, unstartable="spec.postgresql.parameters (shared_buffers): ..."),
            Outcome.TERMINAL,
            "ParametersTooLarge",
            id="parameters-too-large",
        ),
        pytest.param(
            replace(PRE, disk_request=10 * GI), Outcome.SATISFIED, "SpecValid", id="equal-capacity"
        ),
    ],
)
def test_preflight(obs: preflight.Observation, outcome: Outcome, reason: str) -> None:
    """Preflight is Terminal for what a retry cannot fix, Pending while it adds the finalizer."""
    decision = preflight.decide(obs).result
    assert (decision.outcome, decision.reason) == (outcome, reason)
    if outcome is Outcome.TERMINAL:
        assert "spec." in decision.message


def test_an_image_elsewhere_is_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """spec.image in a namespace the operator did not name: preflight does not even look
    it up (whether another tenant's image exists is not for this tenant to learn)."""
    read: list[tuple[str, ...]] = []

    class Kube:
        def get_custom(self, *args: str) -> None:
            read.append(args)

        def pvc(self, namespace: str, name: str) -> None:
            return None

    ctx = Context(kube=cast(Any, Kube()), config=Config())
    model = DBInstance.model_validate(
        {
            "apiVersion": "dbi.dev/v1alpha1",
            "kind": "DBInstance",
            "metadata": {"name": "db", "namespace": "team-a"},
            "spec": {
                "version": 18,
                "image": "team-b/postgres-18",
                "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
            },
        }
    )
    instance = Instance(model=model, uid="u", generation=1, deleting=False, finalizers=())
    obs = preflight.observe(ctx, instance, StepInput(namespace="team-a", name="db", uid="u"))
    assert read == []
    assert preflight.decide(obs).result.reason == "ImageNotAllowed"
