"""The tls step's decision (plain data): serve the current certificate; install a
renewal live over a verified connection; restart, never send the key over an
unverified one, when what is served is not trusted."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest
from kubernetes import client as k8s

from activities.infra import trust
from activities.infra.kube import Kube
from activities.infra.trust import Serves
from activities.steps import tls
from dbi import maintenance
from dbi import tls as certs
from dbi.steps import AT_ONCE, Outcome

SERVING = tls.Observation(address="127.10.0.2", served=Serves.CERTIFICATE, serves_trusted=True)
CURRENT = replace(SERVING, serves_current=True)
UNTRUSTED = replace(SERVING, serves_trusted=False)
A = tls.Action
HOLD = maintenance.Hold(
    until=datetime(2026, 12, 6, 3, tzinfo=UTC), seconds=3600.0, window="daily at 03:00 UTC"
)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(CURRENT, Outcome.SATISFIED, "TLSReady", None, id="serves-its-certificate"),
        pytest.param(
            tls.Observation(stopped=True), Outcome.SATISFIED, "Stopped", None, id="stopped"
        ),
        pytest.param(
            tls.Observation(has_certificate=False), Outcome.PENDING, "NoCertificate", None,
            id="no-certificate-in-the-boot-data-yet",
        ),
        pytest.param(
            replace(SERVING, address=None), Outcome.PENDING, "NoAddress", None, id="no-address"
        ),
        pytest.param(
            replace(SERVING, served=Serves.UNREACHABLE), Outcome.PENDING, "Booting", None,
            id="not-answering",
        ),
        pytest.param(
            replace(SERVING, admin_logs_in=True), Outcome.PENDING, "CertificateInstalled",
            A.INSTALL, id="renewal-installed-live",
        ),
        pytest.param(
            SERVING, Outcome.SATISFIED, "RenewalWaitsForAdmin", None,
            id="renewal-waits-for-the-admin-step-while-the-old-one-is-valid",
        ),
        pytest.param(
            replace(UNTRUSTED, restart_allowed=True, admin_logs_in=True), Outcome.PENDING,
            "Restarting", A.RESTART, id="untrusted-restarts-never-installs-over-it",
        ),
        pytest.param(
            replace(UNTRUSTED, served=Serves.NO_TLS, restart_allowed=True), Outcome.PENDING,
            "Restarting", A.RESTART, id="an-instance-from-before-tls-restarts-into-it",
        ),
        pytest.param(
            UNTRUSTED, Outcome.PENDING, "RestartRequired", None,
            id="deferred-holds-the-restart",
        ),
        pytest.param(
            replace(UNTRUSTED, restart_allowed=True, hold=HOLD), Outcome.PENDING,
            "MaintenanceWindow", None, id="a-closed-window-holds-the-restart-till-it-opens",
        ),
        pytest.param(
            replace(UNTRUSTED, booted_with_current=True, restart_allowed=True),
            Outcome.TERMINAL, "GuestServesNoCertificate", None,
            id="a-guest-that-booted-with-it-and-ignores-it-is-not-restarted-again",
        ),
    ],
)  # fmt: skip
def test_tls(obs: tls.Observation, outcome: Outcome, reason: str, action: tls.Action) -> None:
    decided = tls.decide(obs)
    assert (decided.result.outcome, decided.result.reason, decided.action) == (
        outcome,
        reason,
        action,
    )
    if action is A.INSTALL:
        assert decided.result.requeue_after_seconds == AT_ONCE


def test_a_vmi_started_after_the_certificate_was_issued_booted_with_it() -> None:
    ca = certs.new_ca("team-a")
    pair = certs.issue(ca, certs.service_names("team-a", "db"))
    issued = certs.issued_at(pair.cert_pem).replace(microsecond=0)
    after, before = issued + timedelta(seconds=5), issued - timedelta(seconds=5)
    assert tls.booted_after_issue(after.isoformat().replace("+00:00", "Z"), pair.cert_pem)
    assert not tls.booted_after_issue(before.isoformat().replace("+00:00", "Z"), pair.cert_pem)
    assert not tls.booted_after_issue(None, pair.cert_pem)


class _Secrets:
    """The one call ``trust.read_ca`` makes (``Kube.secret``), counted; the CA Secret is
    there or not as the test says."""

    def __init__(self, ca: certs.KeyPair) -> None:
        self.data: dict[str, bytes | str] | None = {
            "tls.crt": base64.b64encode(ca.cert_pem.encode()).decode(),
            "tls.key": base64.b64encode(ca.key_pem.encode()).decode(),
        }
        self.reads = 0

    def secret(self, namespace: str, name: str) -> k8s.V1Secret | None:
        self.reads += 1
        return None if self.data is None else k8s.V1Secret(data=self.data)


def test_steps_after_credentials_take_its_read_of_the_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    """One GET of the CA per pass: the credentials step's; a CA gone is read again."""
    ca = certs.new_ca("team-a")
    api = _Secrets(ca)
    kube = cast(Kube, api)
    assert trust.read_ca(kube, "dbi-system", "team-a") == ca  # the credentials step
    assert trust.recent_ca(kube, "dbi-system", "team-a") == ca  # tls, admin, health, access
    assert api.reads == 1
    monkeypatch.setattr(trust, "RECENT_SECONDS", 0.0)
    assert trust.recent_ca(kube, "dbi-system", "team-a") == ca
    assert api.reads == 2  # an old read is not taken
    monkeypatch.undo()
    api.data = None  # deleted
    assert trust.read_ca(kube, "dbi-system", "team-a") is None
    assert trust.recent_ca(kube, "dbi-system", "team-a") is None
    assert api.reads == 4  # a missing CA is never remembered
