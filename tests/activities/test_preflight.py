"""preflight's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from activities import preflight
from dbi.steps import Outcome

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
