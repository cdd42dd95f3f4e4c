"""The probes' decisions (plain data): /livez, /readyz and dbi_check_ok."""

from __future__ import annotations

import time
from io import BytesIO
from typing import Any

from prometheus_client import CollectorRegistry

from dbi.health import Health, HealthCollector, TemporalProbe, app


def _get(health: Health, path: str) -> tuple[str, str]:
    """Call the probes' WSGI application as a server would; return (status, body)."""
    seen: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        seen["status"] = status

    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "wsgi.input": BytesIO(),
        "SERVER_NAME": "probe",
        "SERVER_PORT": "0",
        "wsgi.url_scheme": "http",
    }
    body = b"".join(app(health, CollectorRegistry())(environ, start_response))
    return seen["status"], body.decode()


def test_ready_only_when_every_check_passes_and_the_body_says_which_fails() -> None:
    health = Health(checks={"temporal": lambda: None, "watches": lambda: "the Secret watch ..."})
    status, body = _get(health, "/readyz")
    assert status.startswith("503")
    assert body == "ok temporal\nfail watches: the Secret watch ...\n"
    health.checks["watches"] = lambda: None
    assert _get(health, "/readyz") == ("200 OK", "ok temporal\nok watches\n")


def test_a_check_that_raises_fails_readiness_instead_of_the_probe() -> None:
    def broken() -> str | None:
        raise RuntimeError("boom")

    status, body = _get(Health(checks={"x": broken}), "/readyz")
    assert status.startswith("503") and "fail x: the check raised RuntimeError" in body


def test_liveness_fails_when_the_event_loop_stopped_beating() -> None:
    health = Health(stale_after=30)
    assert _get(health, "/livez")[0] == "200 OK"
    health.beat = time.monotonic() - 31  # a loop wedged for 31 s
    status, body = _get(health, "/livez")
    assert status.startswith("503") and "no beat for 31s" in body


def test_liveness_fails_while_a_vital_check_fails_and_readiness_does_not_ask_it() -> None:
    stuck: list[str] = []
    health = Health(
        checks={"temporal": lambda: None},
        vitals={"rechecks": lambda: stuck[0] if stuck else None},
    )
    assert _get(health, "/livez") == ("200 OK", "ok loop\nok rechecks\n")
    stuck.append("the re-check of wf-a has run for 121s")
    assert _get(health, "/livez") == (
        "503 Service Unavailable",
        "ok loop\nfail rechecks: the re-check of wf-a has run for 121s\n",
    )
    assert _get(health, "/readyz") == ("200 OK", "ok temporal\n")


def test_the_metric_follows_each_check() -> None:
    health = Health(
        checks={"temporal": lambda: "silent", "watches": lambda: None},
        vitals={"rechecks": lambda: "stuck"},
    )
    registry = CollectorRegistry()
    registry.register(HealthCollector(health))
    assert registry.get_sample_value("dbi_check_ok", {"check": "temporal"}) == 0.0
    assert registry.get_sample_value("dbi_check_ok", {"check": "watches"}) == 1.0
    assert registry.get_sample_value("dbi_check_ok", {"check": "rechecks"}) == 0.0


def test_temporal_is_ready_while_it_answered_recently() -> None:
    probe = TemporalProbe(client=None, silence=15)  # type: ignore[arg-type]
    assert probe.check() == "Temporal has not answered yet (not asked yet)"
    probe.answered, probe.error = time.monotonic() - 5, ""
    assert probe.check() is None
    probe.answered, probe.error = time.monotonic() - 40, "RPCError"
    assert probe.check() == "Temporal has not answered for 40s (RPCError)"


def test_a_process_still_connecting_is_not_ready() -> None:
    """Before its checks are in place (Temporal being dialled, watches not started) a
    process is not ready: no check at all, or one it named and has not started, fails."""
    assert _get(Health(), "/readyz") == (
        "503 Service Unavailable",
        "fail startup: no check is in place yet\n",
    )
    health = Health.expecting("temporal", "watches")
    assert _get(health, "/readyz") == (
        "503 Service Unavailable",
        "fail temporal: not started yet\nfail watches: not started yet\n",
    )
    health.checks["temporal"] = lambda: None
    assert _get(health, "/readyz")[0].startswith("503")
    health.checks["watches"] = lambda: None
    assert _get(health, "/readyz")[0] == "200 OK"
