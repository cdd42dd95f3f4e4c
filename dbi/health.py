"""Probes for the worker and the watcher: ``/livez`` and ``/readyz`` beside ``/metrics``.

Both processes serve them on ``DBI_METRICS_PORT`` (deploy/ points the pods' probes
there):

- ``/livez`` answers 200 while the process's event loop turns and its vital work goes
  on: a task beats every second, and a beat older than ``stale_after`` (a wedged loop:
  a blocking call on it, a deadlock) answers 503, as does a failing vital check
  (``Health.vitals``; the worker's: its re-checks run, ``Rechecks.stuck``), so the
  kubelet restarts the pod. The body has one line per check, as ``/readyz``'s.
- ``/readyz`` answers 200 when every check passes, else 503; the body has one line per
  check, ``ok <name>`` or ``fail <name>: <why>``. Checks are the process's own
  (``Health.checks``): Temporal answers, for the watcher its watches are live (leader)
  or its Lease loop reaches the API server (standby). Each is named from the start
  (``Health.expecting``) and fails ``not started yet`` until in place, so a process
  still connecting is never ready.
- ``dbi_check_ok{check=...}`` (1 or 0) shows the same on ``/metrics``, for alerts.

A check is a function returning None when all is well, else why not; it must not
block (it reads what a background task last saw).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import REGISTRY, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from temporalio.client import Client
from temporalio.runtime import Runtime

from dbi import connect, temporal_setup

log = logging.getLogger("dbi.health")

Check = Callable[[], str | None]
# How long the event loop may go without a beat before /livez fails.
STALE_SECONDS = 30.0
# How often Temporal is asked whether it serves, and how long it may stay silent.
TEMPORAL_PROBE_SECONDS = 5.0
TEMPORAL_SILENCE_SECONDS = 15.0


def not_started() -> str | None:
    """The check a process names before it can run it: fails until replaced."""
    return "not started yet"


@dataclass
class Health:
    checks: dict[str, Check] = field(default_factory=dict)
    stale_after: float = STALE_SECONDS
    beat: float = field(default_factory=time.monotonic)
    # Liveness checks beside the beat: work the process is for that has stopped, which
    # a restart mends (a check must fail only then, not while the work merely waits).
    vitals: dict[str, Check] = field(default_factory=dict)

    def alive(self) -> tuple[bool, str]:
        """Whether the event loop beat recently and every vital check passes, and one
        line for each."""
        age = time.monotonic() - self.beat
        loop = f"no beat for {age:.0f}s" if age > self.stale_after else None
        results = {"loop": loop, **_run(self.vitals)}
        return _answer(results)

    def results(self) -> dict[str, str | None]:
        """Each readiness check's result (None: fine); a check that raises fails, saying so."""
        return _run(self.checks)

    @classmethod
    def expecting(cls, *names: str) -> Health:
        """Health whose ``names`` checks fail (``not_started``) until the process puts
        them in place: it is not ready while it connects, however long that takes."""
        return cls(checks=dict.fromkeys(names, not_started))

    def ready(self) -> tuple[bool, str]:
        """Whether every check passes (there is at least one), and one line per check."""
        results = self.results()
        if not results:
            return False, "fail startup: no check is in place yet\n"
        return _answer(results)

    async def heartbeat(self) -> None:
        """Beat every second, for as long as the event loop runs this task."""
        while True:
            self.beat = time.monotonic()
            await asyncio.sleep(1.0)


def _run(checks: dict[str, Check]) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name, check in checks.items():
        try:
            found[name] = check()
        except Exception as e:  # a probe must answer, whatever a check does
            found[name] = f"the check raised {type(e).__name__}"
    return found


def _answer(results: dict[str, str | None]) -> tuple[bool, str]:
    """Whether every result passes, and one line per check: ``ok <name>`` or
    ``fail <name>: <why>``."""
    lines = [f"ok {n}" if why is None else f"fail {n}: {why}" for n, why in results.items()]
    return all(why is None for why in results.values()), "\n".join(lines) + "\n"


class HealthCollector(Collector):
    """``dbi_check_ok{check}``: 1 while a readiness or vital check passes, else 0."""

    def __init__(self, health: Health) -> None:
        self.health = health

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "dbi_check_ok", "1 while the probe's check passes, else 0.", labels=["check"]
        )
        for name, why in {**self.health.results(), **_run(self.health.vitals)}.items():
            family.add_metric([name], 1.0 if why is None else 0.0)
        yield family


@dataclass
class TemporalProbe:
    """Asks Temporal's frontend whether it serves (the gRPC health check), every few
    seconds; ``check`` fails once it has not answered for ``silence`` seconds."""

    client: Client
    every: float = TEMPORAL_PROBE_SECONDS
    silence: float = TEMPORAL_SILENCE_SECONDS
    answered: float | None = None
    error: str = "not asked yet"

    def check(self) -> str | None:
        if self.answered is not None and time.monotonic() - self.answered <= self.silence:
            return None
        if self.answered is None:
            return f"Temporal has not answered yet ({self.error})"
        silent = time.monotonic() - self.answered
        return f"Temporal has not answered for {silent:.0f}s ({self.error})"

    async def run(self) -> None:
        while True:
            try:
                serving = await self.client.service_client.check_health(
                    timeout=timedelta(seconds=min(3.0, self.every))
                )
                if serving:
                    if self.answered is None or self.error:
                        log.info("Temporal answers")
                    self.answered, self.error = time.monotonic(), ""
                else:
                    self.error = "not serving"
            except Exception as e:  # unreachable, timed out: the check says so
                if not self.error:
                    log.warning("Temporal does not answer (%s)", type(e).__name__)
                self.error = type(e).__name__
            await asyncio.sleep(self.every)


async def connect_temporal(runtime: Runtime, health: Health) -> tuple[Client, asyncio.Task[None]]:
    """Connect to Temporal as the worker and the watcher do: refuse a namespace without
    dbi's search attributes (``temporal_setup.require``, a SetupNeeded naming them),
    then probe it for ``/readyz``. Return the client and the probe's task (cancel it on
    the way out)."""
    client = await connect.temporal(runtime=runtime)
    await temporal_setup.require(client)
    probe = TemporalProbe(client)
    health.checks["temporal"] = probe.check
    return client, asyncio.create_task(probe.run())


def app(health: Health, registry: Any = REGISTRY) -> Any:
    """The WSGI application: /livez, /readyz, and everything else as /metrics."""
    metrics = make_wsgi_app(registry)

    def serve(environ: dict[str, Any], start_response: Any) -> Iterator[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/livez", "/readyz"):
            ok, body = health.alive() if path == "/livez" else health.ready()
            status = "200 OK" if ok else "503 Service Unavailable"
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return iter([body.encode()])
        return iter(metrics(environ, start_response))

    return serve


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # probes every few seconds
        return


def serve(
    health: Health, port: int, registry: Any = REGISTRY
) -> tuple[WSGIServer, threading.Thread]:
    """Serve /livez, /readyz and /metrics on ``port`` (0: any) in a thread."""
    server = make_server(
        "0.0.0.0",  # noqa: S104 (the pod's probes and Prometheus reach it)
        port,
        app(health, registry),
        server_class=_Server,
        handler_class=_Quiet,
    )
    thread = threading.Thread(target=server.serve_forever, name="probes", daemon=True)
    thread.start()
    return server, thread
