"""A real 410 Gone: the watcher resumes a watch from a compacted resourceVersion.

The test runs a control plane of its own whose API server serves watches from etcd
(``--watch-cache=false``), so compacting etcd past the watcher's last resourceVersion
makes the API server answer its next watch with 410 Gone, as a busy cluster does when
a client falls behind. The watcher is paused (SIGSTOP) while its watch request ends,
an instance changes and etcd is compacted; resumed, it must relist and wake the
instance: the change made while it could not see it is not lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from temporalio.client import Client

from dbi import names
from devstack import controlplane, tools
from devstack.controlplane import ControlPlane, ControlPlanePorts
from devstack.stack import StackInfo
from tests.polling import until_awaited
from tests.watcher.replicas import SPEC, watcher_process
from tests.watcher.wakes import wakes

pytestmark = pytest.mark.stack

WATCH_SECONDS = 2


@pytest.fixture
def uncached(tmp_path: Path, repo_root: Path) -> Iterator[ControlPlane]:
    """A control plane whose watches read etcd directly, with the DBInstance CRD."""
    plane = ControlPlane(
        binary=controlplane.build(),
        data_dir=tmp_path / "controlplane",
        ports=ControlPlanePorts.pick(),
        die_with_parent=True,
        apiserver_args=("--watch-cache=false",),
    )
    plane.start()
    try:
        kubectl = [str(tools.venv_tool("kubectl")), "--kubeconfig", str(plane.kubeconfig)]
        crd = repo_root / "crds" / "dbinstance.yaml"
        subprocess.run([*kubectl, "apply", "--server-side", "-f", str(crd)], check=True)
        name = f"{names.PLURAL}.{names.GROUP}"
        subprocess.run(
            [*kubectl, "wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s"],
            check=True,
        )
        yield plane
    finally:
        plane.stop()


def compact(plane: ControlPlane, revision: int) -> None:
    """Compact etcd's history up to ``revision`` through its JSON gateway."""
    request = urllib.request.Request(  # noqa: S310 (our own loopback etcd)
        f"{plane.etcd}/v3/kv/compaction",
        data=json.dumps({"revision": revision, "physical": True}).encode(),
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
        assert response.status == 200


async def test_a_410_gone_relists_without_losing_a_change(
    uncached: ControlPlane, local_stack: StackInfo, temporal_client: Client, tmp_path: Path
) -> None:
    """Paused past its watch's end while an instance changes and etcd is compacted, the
    watcher is answered 410 Gone, relists, and wakes the instance after the change."""
    api = k8s_config.new_client_from_config(config_file=str(uncached.kubeconfig))
    core, objects = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    namespace = f"gone-{secrets.token_hex(3)}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db"},
        "spec": SPEC,
    }
    objects.create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, body
    )
    workflow_id = names.workflow_id(namespace, "db")
    log = tmp_path / "watcher.log"
    # A task queue no worker polls: the workflow only records the wakes it is sent.
    queue = f"gone-{secrets.token_hex(3)}"
    env = {
        "KUBECONFIG": str(uncached.kubeconfig),
        "DBI_TASK_QUEUE": queue,
        "DBI_WATCH_SECONDS": str(WATCH_SECONDS),
    }
    try:
        with watcher_process(local_stack, namespace, log, **env) as process:
            await until_awaited(lambda: _wakes(temporal_client, workflow_id), what="the first wake")
            process.send_signal(signal.SIGSTOP)
            try:
                # The watch request ends on the server while the watcher cannot resume it.
                await asyncio.sleep(WATCH_SECONDS + 1.5)
                changed = time.time()
                objects.patch_namespaced_custom_object(
                    names.GROUP,
                    names.VERSION,
                    namespace,
                    names.PLURAL,
                    "db",
                    {"spec": {"healthCheckInterval": "42s"}},
                )
                # One more write, so that compacting to it removes the change's revision.
                marker = core.create_namespaced_config_map(
                    namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="marker"))
                )
                assert marker.metadata is not None and marker.metadata.resource_version
                compact(uncached, int(marker.metadata.resource_version))
            finally:
                process.send_signal(signal.SIGCONT)

            async def woken_after_change() -> bool:
                found = await _wakes(temporal_client, workflow_id)
                return any(when.timestamp() >= changed for when, _ in found)

            await until_awaited(woken_after_change, what="a wake after the change")
        text = log.read_text()
        expired = f"watch of DBInstance in {namespace} expired (410 Gone): relisting"
        assert expired in text, text[-2000:]
        reasons = [reason for when, reason in await _wakes(temporal_client, workflow_id)]
        assert reasons[-1] == "relisted"
    finally:
        api.close()
        await _terminate(temporal_client, workflow_id)


async def _wakes(client: Client, workflow_id: str) -> list[Any]:
    try:
        return await wakes(client, workflow_id)
    except Exception:
        return []


async def _terminate(client: Client, workflow_id: str) -> None:
    with contextlib.suppress(Exception):  # never started, or already over
        await client.get_workflow_handle(workflow_id).terminate("test over")
