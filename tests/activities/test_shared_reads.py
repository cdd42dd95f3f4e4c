"""The reads the steps of one pass's activity share (``activities.infra.reads.shared_reads``),
against the real API server: an object read again in the block is the first answer, a
write through the client drops what was read, and outside a block every read is fresh."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from kubernetes import client as k8s

from activities.infra.kube import Kube
from activities.infra.reads import shared_reads
from dbi import connect

pytestmark = pytest.mark.stack


def _value(secret: k8s.V1Secret | None) -> str | None:
    return None if secret is None else base64.b64decode((secret.data or {})["v"]).decode()


def _set(core: k8s.CoreV1Api, namespace: str, value: str) -> None:
    data = {"v": base64.b64encode(value.encode()).decode()}
    core.patch_namespaced_secret("s", namespace, {"data": data})


@pytest.fixture
def kube(local_stack: Any) -> Kube:
    """A Kube over a client of its own, as the worker's (not the test's client)."""
    return Kube(connect.kubernetes(str(local_stack.kubeconfig)))


@pytest.fixture
def core(local_stack: Any) -> k8s.CoreV1Api:
    """Someone else's client: one no Kube wraps (a write through a Kube's client, the
    test session's included, drops what was read)."""
    return k8s.CoreV1Api(connect.kubernetes(str(local_stack.kubeconfig)))


def test_a_block_reads_each_object_once_and_afresh_after_a_write(
    kube: Kube, core: k8s.CoreV1Api, namespace: str
) -> None:
    with shared_reads():
        assert kube.secret(namespace, "s") is None  # a 404 is an answer too
        core.create_namespaced_secret(
            namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s"), string_data={"v": "1"})
        )
        assert kube.secret(namespace, "s") is None
        kube.service(namespace, "other")  # a read of another object drops nothing
        assert kube.secret(namespace, "s") is None
        # A write through this client (any kind) makes the next read go to the server.
        kube.apply_secret(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "t", "namespace": namespace},
                "stringData": {"v": "x"},
            }
        )
        first = kube.secret(namespace, "s")
        assert _value(first) == "1"
        _set(core, namespace, "2")
        again = kube.secret(namespace, "s")
        assert _value(again) == "1"
        # Each read is an object of its own: changing one changes no other.
        assert first is not None and again is not None and first is not again
        assert first.data is not None
        first.data["v"] = "changed"
        assert _value(kube.secret(namespace, "s")) == "1"
    # Outside the block, and in a new one, every read is the server's.
    assert _value(kube.secret(namespace, "s")) == "2"
    _set(core, namespace, "3")
    assert _value(kube.secret(namespace, "s")) == "3"
    with shared_reads():
        assert _value(kube.secret(namespace, "s")) == "3"


def test_a_second_kube_over_the_same_client_shares_the_same_way(
    kube: Kube, core: k8s.CoreV1Api, namespace: str
) -> None:
    """The worker builds one Kube; a second over the same client wraps it once."""
    again = Kube(kube.api)
    core.create_namespaced_secret(
        namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s"), string_data={"v": "1"})
    )
    with shared_reads():
        assert _value(again.secret(namespace, "s")) == "1"
        _set(core, namespace, "2")
        assert _value(kube.secret(namespace, "s")) == "1"
        again.delete("Secret", namespace, "t")  # a write, of a missing object even
        assert _value(kube.secret(namespace, "s")) == "2"
