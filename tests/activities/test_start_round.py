"""A worker that starts looks at the Ready instances another worker had settled.

A settled instance's workflow waits RECHECK_NET (6 h) for its own pass while the worker
that settled it re-checks it (activities.worker.rechecks). When that worker goes (alone on its
task queue, so it hands nothing on: test_hand_off.py), the one that starts next has
settled nothing: its start round asks each workflow for a pass now (``Wake.settle``),
so the instance is looked at within an interval, not hours.
"""

from __future__ import annotations

import asyncio
import signal
import uuid
from pathlib import Path

import pytest
from temporalio.client import Client

from devstack import tools
from devstack.stack import StackInfo
from tests.activities.crashing import worker
from tests.activities.start_round import (
    PASS_SECONDS,
    apply_instance,
    start_workflow,
    until_settled,
)
from tests.probes import probe
from tests.stack import Kubectl

pytestmark = pytest.mark.stack


@pytest.mark.usefixtures("images")
async def test_a_worker_that_starts_looks_at_a_settled_instance_at_once(
    local_stack: StackInfo,
    namespace: str,
    kubectl: Kubectl,
    temporal_client: Client,
    tmp_path: Path,
) -> None:
    queue = f"start-{uuid.uuid4().hex[:8]}"
    apply_instance(kubectl, namespace)
    port = tools.free_port()
    first = await asyncio.to_thread(
        worker,
        local_stack,
        queue,
        tmp_path / "first.log",
        DBI_WATCH_NAMESPACES=namespace,
        DBI_METRICS_PORT=str(port),
    )
    try:
        handle = await start_workflow(temporal_client, namespace, queue)
        # Ready, then its first health check's pass settles it: hours to its own pass.
        settled = await until_settled(handle, 0, 240)
        # Its liveness counts on the re-checks that now stand in for those hours.
        assert probe(port, "/livez") == (200, "ok loop\nok rechecks\n")
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(60)
    # Alone on its queue, it handed nothing on: the passes would wait for the next worker.
    assert "no other worker polls" in (tmp_path / "first.log").read_text()
    second = await asyncio.to_thread(
        worker, local_stack, queue, tmp_path / "second.log", DBI_WATCH_NAMESPACES=namespace
    )
    try:
        # Nothing else wakes it here (no watcher runs): only the start round's wake.
        await until_settled(handle, settled.passes, PASS_SECONDS)
        assert "asking 1 instances for a pass" in (tmp_path / "second.log").read_text()
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(60)
