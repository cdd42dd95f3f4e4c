"""The worker's and the watcher's metrics endpoints, and their JSON logs, as processes."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from bench import measure
from bench.measure import total
from devstack import tools
from devstack.stack import StackInfo
from tests.activities.crashing import worker
from tests.polling import eventually
from tests.stack import Kubectl
from tests.watcher.replicas import SPEC, watcher_process

pytestmark = pytest.mark.stack


def scrape(port: int) -> measure.Samples:
    return measure.scrape(f"http://127.0.0.1:{port}/metrics")


async def test_the_metrics_endpoints_answer_and_move_as_an_instance_converges(
    local_stack: StackInfo,
    namespace: str,
    kubectl: Kubectl,
    images: dict[int, str],
    tmp_path: Path,
) -> None:
    """Worker and watcher serve Prometheus metrics: the SDK's, passes, step outcomes, the
    time to Ready, the watcher's counters and instances by phase; every log line is JSON."""
    queue = f"metrics-{uuid.uuid4().hex[:8]}"
    worker_port, watcher_port = tools.free_port(), tools.free_port()
    env = {"DBI_TASK_QUEUE": queue}
    process = await asyncio.to_thread(
        worker, local_stack, queue, tmp_path / "worker.log", DBI_METRICS_PORT=str(worker_port)
    )
    try:
        with watcher_process(
            local_stack,
            namespace,
            tmp_path / "watcher.log",
            DBI_METRICS_PORT=str(watcher_port),
            **env,
        ):
            before = await asyncio.to_thread(eventually, lambda: scrape(worker_port))
            assert total(before, "dbi_passes_total") == 0
            manifest = {
                "apiVersion": "dbi.dev/v1alpha1",
                "kind": "DBInstance",
                "metadata": {"name": "db", "namespace": namespace},
                "spec": SPEC,
            }
            await asyncio.to_thread(kubectl, "apply", "-f", "-", stdin=json.dumps(manifest))
            await asyncio.to_thread(
                kubectl,
                "wait",
                "--for=condition=Ready",
                "dbinstance/db",
                "-n",
                namespace,
                "--timeout=120s",
            )

            def worker_moved() -> Any:
                after = scrape(worker_port)
                return after if total(after, "dbi_generation_ready_seconds_count") >= 1 else None

            after = await asyncio.to_thread(eventually, worker_moved, timeout=30)
            assert total(after, "dbi_passes_total", outcome="Converged") >= 1
            assert total(after, "dbi_step_outcomes_total", step="health", outcome="Satisfied") >= 1
            assert total(after, "dbi_step_duration_seconds_count", step="vm") >= 1
            assert any(name.startswith("temporal_") for name, _ in after), "no SDK metrics"

            def watcher_saw_it() -> Any:
                samples = scrape(watcher_port)
                running = total(samples, "dbi_instances", phase="Running")
                instance = frozenset({("namespace", namespace), ("name", "db")})
                ready = samples.get(("dbi_instance_ready", instance))
                return samples if running == 1 and ready == 1 else None

            seen = await asyncio.to_thread(eventually, watcher_saw_it, timeout=30)
            assert total(seen, "dbi_watcher_events_total") >= 1
            assert total(seen, "dbi_watcher_signals_total") >= 1
            # Bounded cardinality: one series per instance, its Ready; no other series
            # is labeled with the instance's name.
            for samples in (after, seen):
                for metric, labels in samples:
                    if metric == "dbi_instance_ready":
                        continue
                    assert "db" not in {value for _, value in labels}
                    assert namespace not in {value for _, value in labels}
    finally:
        process.terminate()
        process.wait(timeout=30)
    for log in ("worker.log", "watcher.log"):
        for line in (tmp_path / log).read_text().splitlines():
            record = json.loads(line)
            assert {"time", "level", "logger", "message", "instance", "step", "trace_id"} <= set(
                record
            ), line
