"""monitoring's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

import pytest

from activities import monitoring
from dbi.steps import Outcome


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(
            monitoring.Observation(True, True, True, True, True, True),
            Outcome.SATISFIED,
            "MonitoringReady",
            id="ready",
        ),
        pytest.param(
            monitoring.Observation(True, False, False, True, False, False),
            Outcome.PENDING,
            "MonitoringApplied",
            id="create",
        ),
        pytest.param(
            monitoring.Observation(True, True, True, False, False, False),
            Outcome.SATISFIED,
            "ServiceMonitorUnavailable",
            id="no-crd",
        ),
        pytest.param(
            monitoring.Observation(False, False, True, True, False, True),
            Outcome.PENDING,
            "MonitoringRemoved",
            id="disable",
        ),
        pytest.param(
            monitoring.Observation(False, False, False, True, False, False),
            Outcome.SATISFIED,
            "Disabled",
            id="disabled",
        ),
    ],
)
def test_monitoring(obs: monitoring.Observation, outcome: Outcome, reason: str) -> None:
    """Monitoring objects follow monitoring.enabled; no ServiceMonitor API is not a failure loop."""
    decision = monitoring.decide(obs).result
    assert (decision.outcome, decision.reason) == (outcome, reason)
