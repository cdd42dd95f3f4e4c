"""Watchers as processes: a killed one loses nothing, and two elect one leader."""

from __future__ import annotations

import asyncio
import functools
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.client import Client

from dbi import names
from devstack.stack import StackInfo
from tests.polling import eventually
from tests.watcher.replicas import SPEC, watcher_process
from tests.watcher.wakes import wakes

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("dbinstance_crd")]


def lease_holder(kube_api: Any, namespace: str) -> str | None:
    """Who holds the watchers' Lease in ``namespace``; None when no one (or no Lease)."""
    try:
        lease = k8s.CoordinationV1Api(kube_api).read_namespaced_lease("dbi-watcher", namespace)
    except k8s.ApiException:
        return None
    return lease.spec.holder_identity if lease.spec else None


def patch(objects: Any, namespace: str, name: str, n: int) -> None:
    objects.patch_namespaced_custom_object(
        names.GROUP,
        names.VERSION,
        namespace,
        names.PLURAL,
        name,
        {"metadata": {"labels": {"change": str(n)}}},
    )


async def last_wake(client: Client, namespace: str, name: str) -> float:
    try:
        found = await wakes(client, names.workflow_id(namespace, name))
    except Exception:
        return 0.0
    return max((when.timestamp() for when, _ in found), default=0.0)


async def test_a_killed_watcher_loses_no_change(
    local_stack: StackInfo, namespace: str, kube_api: Any, temporal_client: Client, tmp_path: Path
) -> None:
    """Killed during a burst of changes to 50 instances and restarted, the watcher wakes every
    instance after its last change."""
    objects = k8s.CustomObjectsApi(kube_api)
    instances = [f"db{i}" for i in range(50)]
    for name in instances:
        body = {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": {"name": name},
            "spec": SPEC,
        }
        objects.create_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, body
        )
    last_change: dict[str, float] = {}
    with watcher_process(local_stack, namespace, tmp_path / "first.log") as first:
        deadline = time.monotonic() + 30
        while not await last_wake(temporal_client, namespace, instances[-1]):
            assert time.monotonic() < deadline, "the first watcher did not list the instances"
            await asyncio.sleep(0.2)
        for n in range(3):
            for name in instances:
                await asyncio.to_thread(patch, objects, namespace, name, n)
                last_change[name] = time.time()
                if n == 1 and name == "db24":
                    first.send_signal(signal.SIGKILL)
    with watcher_process(local_stack, namespace, tmp_path / "second.log"):
        for name in instances:
            deadline = time.monotonic() + 30
            while await last_wake(temporal_client, namespace, name) < last_change[name]:
                assert time.monotonic() < deadline, f"{name} was not woken after its last change"
                await asyncio.sleep(0.2)


async def test_two_watchers_elect_one_leader_and_the_other_takes_over(
    local_stack: StackInfo, namespace: str, kube_api: Any, temporal_client: Client, tmp_path: Path
) -> None:
    """Of two replicas one holds the Lease; killed, the other takes over within its duration
    and signals the next change."""
    holder = functools.partial(lease_holder, kube_api, namespace)
    env = {"DBI_LEASE_NAMESPACE": namespace, "DBI_LEASE_SECONDS": "3"}
    with (
        watcher_process(local_stack, namespace, tmp_path / "a.log", POD_NAME="a", **env) as a,
        watcher_process(local_stack, namespace, tmp_path / "b.log", POD_NAME="b", **env) as b,
    ):
        leader = await asyncio.to_thread(eventually, holder, what="a leader")
        assert leader in {"a", "b"}
        killed, survivor = (a, "b") if leader == "a" else (b, "a")
        killed.send_signal(signal.SIGKILL)
        await asyncio.to_thread(
            eventually, lambda: holder() == survivor, timeout=30, what="a takeover"
        )

        objects = k8s.CustomObjectsApi(kube_api)
        body = {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": {"name": "db"},
            "spec": SPEC,
        }
        objects.create_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, body
        )
        created = time.time()
        deadline = time.monotonic() + 15
        while await last_wake(temporal_client, namespace, "db") < created - 1:
            assert time.monotonic() < deadline, "the new leader did not signal"
            await asyncio.sleep(0.2)
        log = (tmp_path / f"{survivor}.log").read_text()
        assert f"leading as {survivor}" in log


async def test_a_leader_stopped_cleanly_gives_its_lease_up_at_once(
    local_stack: StackInfo, namespace: str, kube_api: Any, tmp_path: Path
) -> None:
    """SIGTERM (a rollout, a drain): the leader gives the Lease up as it stops, so the
    other replica takes over at its next try (a third of the Lease), not after the
    Lease expires (its whole duration after the last renewal)."""
    holder = functools.partial(lease_holder, kube_api, namespace)
    env = {"DBI_LEASE_NAMESPACE": namespace, "DBI_LEASE_SECONDS": "30"}
    with (
        watcher_process(local_stack, namespace, tmp_path / "a.log", POD_NAME="a", **env) as a,
        watcher_process(local_stack, namespace, tmp_path / "b.log", POD_NAME="b", **env) as b,
    ):
        leader = await asyncio.to_thread(eventually, holder, what="a leader")
        stopped, survivor = (a, "b") if leader == "a" else (b, "a")
        stopped.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(stopped.wait, 20) == 0
        # Given up as it stopped: the Lease no longer names it (it would for 30 s more).
        assert holder() != leader, "the stopped leader kept its Lease"
        await asyncio.to_thread(
            eventually, lambda: holder() == survivor, timeout=25, what="a takeover"
        )
