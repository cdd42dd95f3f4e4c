"""A worker killed in the middle of the vm step, and another one taking over."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from pathlib import Path
from typing import Any, cast

import pytest
from temporalio.client import Client

from dbi import names
from dbi.messages import WorkflowInput
from devstack.stack import StackInfo
from tests.activities.crashing import SPEC, worker
from tests.stack import Kubectl
from workflows.dbinstance import DBInstanceWorkflow

pytestmark = pytest.mark.stack


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
