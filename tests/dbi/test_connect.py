"""The Kubernetes connection the worker makes: no request waits for ever."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from kubernetes import client as k8s

from dbi import connect


@pytest.fixture
def silent_server(tmp_path: Path) -> Iterator[Path]:
    """A kubeconfig for a server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    yield kubeconfig
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    listener.close()


def test_a_request_the_api_server_never_answers_fails_instead_of_hanging(
    silent_server: Path,
) -> None:
    """A worker thread whose request gets no answer gets an error back (its activity is
    retried, the pass goes on) instead of holding the thread for ever."""
    api = connect.kubernetes(str(silent_server), request_timeout=(1.0, 1.0))
    outcome: list[BaseException | None] = []

    def call() -> None:
        try:
            k8s.CoreV1Api(api).read_namespace("anything")
        except BaseException as e:
            outcome.append(e)
        else:
            outcome.append(None)

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(30)  # a bound for "never": the request's own timeout is 1 s
    assert not worker.is_alive(), "the request is still waiting for an answer"
    assert outcome and outcome[0] is not None and "timed out" in str(outcome[0]).lower()
