"""A worker process the test can kill mid-activity, and a wait for an activity's
heartbeat."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from devstack.stack import StackInfo

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}


def worker(local_stack: StackInfo, queue: str, log: Path, **extra: str) -> subprocess.Popen[bytes]:
    """Start ``python -m workflows.worker`` on ``queue``; return once it polls."""
    env = {
        **os.environ,
        "KUBECONFIG": local_stack.kubeconfig,
        "TEMPORAL_ADDRESS": local_stack.temporal_address,
        "DBI_TASK_QUEUE": queue,
        **extra,
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "workflows.worker"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + 60
    while "polling task queue" not in log.read_text():
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
    return process


async def heartbeating(client: Client, workflow_id: str, activity: str) -> None:
    """Return once ``activity`` of the workflow has started and heartbeated: what a
    worker killed now is in the middle of."""
    handle = client.get_workflow_handle(workflow_id)
    while True:
        described = await handle.describe()
        if any(
            p.activity_type.name == activity
            and p.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            and p.heartbeat_details.payloads
            for p in described.raw_description.pending_activities
        ):
            return
        await asyncio.sleep(0.2)
