"""What the watcher's lists and watches receive from the API server: Secrets as
metadata alone (never a password), and, with namespaces given, only those namespaces
(stack tests against the real API server)."""

from __future__ import annotations

import base64
import json
import secrets
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from dbi import names
from dbi.streams import Listener, Source, list_then_watch
from tests.polling import eventually
from watcher.watcher import sources

pytestmark = pytest.mark.stack

PASSWORD = secrets.token_urlsafe(16)


def _secret(kube_api: Any, namespace: str, name: str) -> None:
    k8s.CoreV1Api(kube_api).create_namespaced_secret(
        namespace,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name=name, labels={names.INSTANCE_LABEL: "orders"}),
            string_data={"password": PASSWORD},
        ),
    )


def _secrets_heard(kube_api: Any, source: Source, stop: threading.Event) -> list[dict[str, Any]]:
    """Run the source's list-then-watch in a thread; return the objects it hands on."""
    heard: list[dict[str, Any]] = []
    listener = Listener(lambda _event, obj: heard.append(obj))
    threading.Thread(
        target=list_then_watch, args=(kube_api, source, listener, stop, 5), daemon=True
    ).start()
    return heard


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.parametrize("scoped", [False, True], ids=["all-namespaces", "per-namespace"])
def test_the_secret_watch_receives_metadata_and_never_a_password(
    kube_api: Any, namespace: str, stop: threading.Event, scoped: bool
) -> None:
    """A labelled Secret created while watched, then listed by a second list-then-watch,
    reaches the handler with its name, labels and resourceVersion, and without its data:
    not a byte of it. The first list finds the namespace empty (which the API server
    sends as ``items: null``)."""
    (source,) = [
        s
        for s in sources(kube_api, frozenset({namespace}) if scoped else None)
        if s.kind == "Secret"
    ]
    watched = _secrets_heard(kube_api, source, stop)
    _secret(kube_api, namespace, "orders-credentials")

    def ours(heard: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [o for o in heard if o["metadata"].get("namespace") == namespace]

    eventually(lambda: ours(watched), what="the watched Secret")
    listed = _secrets_heard(kube_api, source, stop)
    eventually(lambda: ours(listed), what="the listed Secret")
    heard = watched + listed
    for obj in ours(heard):
        assert obj["metadata"]["name"] == "orders-credentials"
        assert obj["metadata"]["labels"] == {names.INSTANCE_LABEL: "orders"}
        assert obj["metadata"]["resourceVersion"]
        assert "data" not in obj and "stringData" not in obj, obj
    text = json.dumps(heard)
    assert PASSWORD not in text
    assert base64.b64encode(PASSWORD.encode()).decode() not in text


def test_per_namespace_sources_list_only_their_namespaces(kube_api: Any) -> None:
    """Given namespaces, every source lists one of them (what RoleBindings allow), one
    source per kind and namespace; without, every source lists all namespaces."""
    scoped = sources(kube_api, frozenset({"team-a", "team-b"}))
    kinds = {s.kind for s in sources(kube_api)}
    assert {(s.kind, s.namespace) for s in scoped} == {
        (k, n) for k in kinds for n in ("team-a", "team-b")
    }
    assert all(s.namespace in s.args for s in scoped)
    assert all(s.namespace is None for s in sources(kube_api))
