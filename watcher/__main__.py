"""Run the watcher: ``python -m watcher`` (or ``dbi watcher``).

Environment: ``TEMPORAL_ADDRESS`` (default 127.0.0.1:7233), ``TEMPORAL_NAMESPACE``
(default ``default``), ``KUBECONFIG`` (or in-cluster credentials), and
``DBI_WATCH_NAMESPACES`` (comma-separated, each listed and watched on its own; all
namespaces, cluster-wide, when unset), and
``DBI_LEASE_NAMESPACE``: when set, replicas elect a leader on the Lease
``dbi-watcher`` there (identity ``POD_NAME``, or host and pid; ``DBI_LEASE_SECONDS``,
default 15); only the leader signals. ``DBI_METRICS_PORT``, ``DBI_LOG_FORMAT`` and the
``OTEL_*`` variables are read by ``dbi.telemetry``. ``DBI_TASK_QUEUE`` (default ``dbi``) is the
queue the workflows it starts run on; ``DBI_WATCH_SECONDS`` (default 240) is how long
one watch request lasts before it is resumed from its last resourceVersion.
``/readyz`` on the metrics port fails while Temporal does not answer, while a leader's
watch has been down for 20 s, or while a standby cannot reach the Lease (``dbi.health``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket

from prometheus_client import REGISTRY
from temporalio.runtime import Runtime

from dbi import connect, environment, metrics, telemetry
from dbi.health import Health, connect_temporal
from dbi.streams import WATCH_SECONDS
from watcher.leader import LeaderElection
from watcher.wakeups import Wakeups
from watcher.watcher import Watcher

log = logging.getLogger("dbi.watcher")
# How long a stopping watcher may take to end its watches and give its Lease up.
STOP_SECONDS = 15.0


async def main() -> None:
    health = Health.expecting("temporal", "watches")
    async with telemetry.process_telemetry("dbi-watcher", health) as runtime:
        await serve(runtime, health)


async def serve(runtime: Runtime, health: Health) -> None:
    client, probing = await connect_temporal(runtime, health)
    address = client.service_client.config.target_host
    namespaces = environment.WATCH_NAMESPACES.items()
    api = connect.kubernetes()
    election = None
    if lease_namespace := environment.LEASE_NAMESPACE.get():
        identity = environment.POD_NAME.get() or f"{socket.gethostname()}-{os.getpid()}"
        duration = environment.LEASE_SECONDS.seconds() or 15.0
        election = LeaderElection(
            api=api, namespace=lease_namespace, identity=identity, duration=duration
        )
    watcher = Watcher(
        api=api,
        client=client,
        wakeups=Wakeups(client, task_queue=environment.TASK_QUEUE.value()),
        namespaces=namespaces,
        election=election,
        watch_seconds=environment.WATCH_SECONDS.integer(low=1) or WATCH_SECONDS,
    )
    REGISTRY.register(
        metrics.WatcherCollector(
            lambda: watcher.wakeups.counters, lambda: watcher.statuses, lambda: watcher.backups
        )
    )
    health.checks["watches"] = watcher.problem
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, watcher.stop.set)
    log.info(
        "watching %s; signaling at %s",
        ", ".join(sorted(namespaces)) if namespaces else "all namespaces",
        address,
    )
    task = asyncio.create_task(watcher.run())
    await asyncio.get_running_loop().run_in_executor(None, watcher.stop.wait)
    try:  # it sees the stop within a tick, and gives its Lease up
        await asyncio.wait_for(task, STOP_SECONDS)
    except TimeoutError:
        task.cancel()
    probing.cancel()
    await watcher.wakeups.drain()
    c = watcher.wakeups.counters
    log.info(
        "stopped: %d events seen (%d more ignored), %d signals sent, %d coalesced",
        c.events_seen,
        c.events_ignored,
        c.signals_sent,
        c.coalesced,
    )


if __name__ == "__main__":
    asyncio.run(main())
