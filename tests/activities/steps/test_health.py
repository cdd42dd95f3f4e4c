"""health's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from activities.infra import postgres
from activities.infra.postgres import Login
from activities.steps import health
from dbi.steps import Outcome

ADDRESS = "127.10.0.2"
UP = health.Observation(stopped=False, address=ADDRESS, reachable=True, version="18.6")


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(
            replace(UP, service_host="db.shop.svc"),
            Outcome.SATISFIED,
            "Healthy",
            id="healthy",
        ),
        pytest.param(health.Observation(stopped=True), Outcome.SATISFIED, "Stopped", id="stopped"),
        pytest.param(
            health.Observation(stopped=False), Outcome.PENDING, "NoAddress", id="no-address"
        ),
        pytest.param(
            health.Observation(stopped=False, address=ADDRESS, login=Login.UNREACHABLE),
            Outcome.PENDING,
            "Booting",
            id="booting",
        ),
        pytest.param(
            replace(UP, in_recovery=True),
            Outcome.PENDING,
            "InRecovery",
            id="recovery",
        ),
        pytest.param(
            replace(UP, service_host="db.shop.svc", spec_version=18),
            Outcome.SATISFIED,
            "Healthy",
            id="the-major-spec-version-asks-for",
        ),
        pytest.param(
            replace(UP, version="16.15", spec_version=17),
            Outcome.TERMINAL,
            "VersionMismatch",
            id="another-major-than-spec-version",
        ),
        pytest.param(
            health.Observation(stopped=False, address=ADDRESS, login=Login.REFUSED),
            Outcome.TERMINAL,
            "AdminPasswordRefused",
            id="admin-refused",
        ),
        pytest.param(
            health.Observation(stopped=False, address=ADDRESS, login=Login.INSECURE),
            Outcome.TERMINAL,
            "InsecureAuthentication",
            id="a-guest-asking-for-the-password-in-clear-gets-nothing-and-stalls",
        ),
    ],
)
def test_health(obs: health.Observation, outcome: Outcome, reason: str) -> None:
    """Health publishes the endpoint (the Service's name, not the VM's address, which
    goes to status.observed) when PostgreSQL answers, and waits while it boots."""
    decision = health.decide(obs).result
    assert (decision.outcome, decision.reason) == (outcome, reason)
    if reason == "Healthy":
        facts = decision.facts
        assert (facts.endpoint_host, facts.address, facts.postgres_version) == (
            "db.shop.svc",
            "127.10.0.2",
            "18.6",
        )


@pytest.mark.parametrize(
    ("version", "major"),
    [("16.15", 16), ("18.6 (Debian 18.6-1.pgdg120+1)", 18), ("19devel", None), (None, None)],
)
def test_the_major_of_a_server_version(version: str | None, major: int | None) -> None:
    assert postgres.major(version) == major


def test_a_mismatch_names_both_versions_and_publishes_the_one_running() -> None:
    obs = replace(UP, version="16.15", spec_version=17)
    decision = health.decide(obs).result
    assert "PostgreSQL 16.15 runs, but spec.version is 17" in decision.message
    assert decision.facts.postgres_version == "16.15"
