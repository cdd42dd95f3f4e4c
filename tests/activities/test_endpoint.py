"""The stable endpoint: the Service <name> is what the Secret and status.endpoint name,
so a VM restart, which gives the VM a new address (KubeVirt's does; the stand-in too),
changes nothing for clients: the same uri connects again with every row there. Real
stack: the stand-in plays kube-proxy on each Service's ClusterIP."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from dbi import names
from tests.activities.endpoint import vm_address
from tests.activities.lifecycle import SPEC, create, ready
from tests.activities.logins import secret
from tests.appclient import conninfo
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def rows(uri: str) -> int:
    with psycopg.connect(uri, connect_timeout=3) as conn:
        return int(conn.execute("SELECT count(*) FROM orders").fetchone()[0])  # type: ignore[index]


async def test_a_restart_moves_the_vm_and_the_same_uri_connects_again(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    db = await create(orchestrator, namespace, SPEC)
    host = names.service_host(namespace, "db")
    assert db["status"]["endpoint"] == {"host": host, "port": 5432}
    before = vm_address(kube_api, namespace)
    assert db["status"]["observed"]["address"] == before
    service = k8s.CoreV1Api(kube_api).read_namespaced_service("db", namespace)
    assert service.spec is not None and service.spec.selector == {names.INSTANCE_LABEL: "db"}
    data = secret(kube_api, namespace, "db-credentials")
    assert data["host"] == host and data["hostaddr"] == service.spec.cluster_ip
    uri = conninfo(data)
    with psycopg.connect(uri, connect_timeout=3, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int PRIMARY KEY)")
        await asyncio.sleep(5)  # a session may idle: the Service does not cut it
        conn.execute("INSERT INTO orders SELECT generate_series(1, 100)")

    # KubeVirt replaces a deleted VMI of a running VM: a restart, in a new pod.
    k8s.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        "kubevirt.io", "v1", namespace, "virtualmachineinstances", "db"
    )
    await orchestrator.until(
        lambda: vm_address(kube_api, namespace) not in (None, before), what="a new VM address"
    )
    await orchestrator.until(lambda: _connects(uri), what="the same uri to connect again")
    assert rows(uri) == 100
    # The status reports the new address once a pass has seen it: the one the restart's
    # wake brings (the Ready status read before that pass is the one from before).
    moved = vm_address(kube_api, namespace)
    await orchestrator.until(
        lambda: orchestrator.get(namespace, "db")["status"]["observed"].get("address") == moved,
        what="the status to report the new address",
    )
    after = await ready(orchestrator, namespace)
    assert after["status"]["endpoint"] == {"host": host, "port": 5432}
    assert after["status"]["observed"]["address"] == moved != before
    assert secret(kube_api, namespace, "db-credentials")["uri"] == data["uri"]  # as it was


def _connects(uri: str) -> bool:
    try:
        rows(uri)
    except psycopg.OperationalError:
        return False
    return True
