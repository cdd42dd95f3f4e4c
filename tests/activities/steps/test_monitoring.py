"""monitoring's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

import pytest

from activities.steps import monitoring
from dbi.steps import Outcome


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(
            monitoring.Observation(
                enabled=True,
                service_ok=True,
                service_exists=True,
                monitor_api=True,
                monitor_ok=True,
                monitor_exists=True,
            ),
            Outcome.SATISFIED,
            "MonitoringReady",
            id="ready",
        ),
        pytest.param(
            monitoring.Observation(
                enabled=True,
                service_ok=False,
                service_exists=False,
                monitor_api=True,
                monitor_ok=False,
                monitor_exists=False,
            ),
            Outcome.PENDING,
            "MonitoringApplied",
            id="create",
        ),
        pytest.param(
            monitoring.Observation(
                enabled=True,
                service_ok=True,
                service_exists=True,
                monitor_api=False,
                monitor_ok=False,
                monitor_exists=False,
            ),
            Outcome.SATISFIED,
            "ServiceMonitorUnavailable",
            id="no-crd",
        ),
        pytest.param(
            monitoring.Observation(
                enabled=False,
                service_ok=False,
                service_exists=True,
                monitor_api=True,
                monitor_ok=False,
                monitor_exists=True,
            ),
            Outcome.PENDING,
            "MonitoringRemoved",
            id="disable",
        ),
        pytest.param(
            monitoring.Observation(
                enabled=False,
                service_ok=False,
                service_exists=False,
                monitor_api=True,
                monitor_ok=False,
                monitor_exists=False,
            ),
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
