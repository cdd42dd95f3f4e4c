"""A worker killed in the middle of the vm step, and another one taking over."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from dbi import names
from dbi.messages import WorkflowInput
from devstack.stack import StackInfo
from tests.stack import Kubectl
from workflows.dbinstance import DBInstanceWorkflow

pytestmark = pytest.mark.stack

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


def vms(kubectl: Kubectl, namespace: str) -> list[dict[str, Any]]:
    selector = f"{names.INSTANCE_LABEL}=db"
    out = kubectl(
        "get", "virtualmachines.kubevirt.io", "-n", namespace, "-l", selector, "-o", "json"
    )
    return cast(list[dict[str, Any]], json.loads(out.stdout)["items"])


@pytest.mark.usefixtures("images")
@pytest.mark.parametrize(
    "standby",
    [False, True],
    ids=["restarted", "two-workers-one-killed"],
)
async def test_a_worker_killed_during_the_vm_step_leaves_exactly_one_vm(
    local_stack: StackInfo,
    namespace: str,
    kubectl: Kubectl,
    temporal_client: Client,
    tmp_path: Path,
    standby: bool,
) -> None:
    """The worker dies right as the VM is created; another worker finishes, with one VM:
    one started after the kill, or (``standby``, as deploy/'s two replicas) one already
    polling the task queue, which takes over the workflow (its sticky queue on the dead
    worker times out) and the step's retry."""
    queue = f"crash-{uuid.uuid4().hex[:8]}"
    manifest = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db", "namespace": namespace},
        "spec": SPEC,
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(manifest))
    first = await asyncio.to_thread(worker, local_stack, queue, tmp_path / "first.log")
    try:
        await temporal_client.start_workflow(
            DBInstanceWorkflow.run,
            WorkflowInput(namespace=namespace, name="db"),
            id=names.workflow_id(namespace, "db"),
            task_queue=queue,
        )
        deadline = time.monotonic() + 60
        while not vms(kubectl, namespace):
            assert time.monotonic() < deadline, "no VM was created"
            await asyncio.sleep(0.02)
        if standby:
            first.send_signal(signal.SIGSTOP)  # no further step while the other starts
            second = await asyncio.to_thread(worker, local_stack, queue, tmp_path / "second.log")
        first.send_signal(signal.SIGKILL)
    finally:
        first.kill()
        first.wait()
    if not standby:
        second = await asyncio.to_thread(worker, local_stack, queue, tmp_path / "second.log")
    try:
        await asyncio.to_thread(
            kubectl,
            "wait",
            "--for=condition=Ready",
            "dbinstance/db",
            "-n",
            namespace,
            "--timeout=180s",
        )
        assert len(vms(kubectl, namespace)) == 1
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
