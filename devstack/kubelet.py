"""A kubelet stand-in that serves pods' logs, so that what reads them through the API
server (``kubectl logs``, ``dbi logs``) works against the local stack, whose worker and
watcher run as processes writing log files. ``dbi dev up`` runs it as a process
(``python -m devstack.kubelet --kubeconfig K --namespace NS --log-dir D``); the tests
use ``serving`` in theirs.

``serving`` registers a Node whose kubelet endpoint is a loopback HTTPS server, and one
Pod bound to it for each process, labeled as the Deployments' pods are. The API server
proxies ``GET .../pods/NAME/log`` to that server (it checks no kubelet certificate
without ``--kubelet-certificate-authority``), which answers with the process's log file
(``tailLines`` honoured). Nothing runs the Pods: they stay Pending, and are deleted with
the Node when the block ends. Dev and test tooling."""

from __future__ import annotations

import argparse
import re
import secrets
import signal
import ssl
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from dbi import connect, tls
from devstack import tools

_LOGS = re.compile(r"^/containerLogs/([^/]+)/([^/]+)/([^/?]+)$")


@dataclass(frozen=True)
class Pod:
    """A process shown as a Pod: its name, labels, container and the log it writes."""

    name: str
    labels: dict[str, str]
    container: str
    log: Path


def orchestrator_pods(suffix: str, log_dir: Path) -> list[Pod]:
    """A Pod for each of the worker and the watcher (``dbi-worker-<suffix>``), labeled
    and named as deploy/base's Deployments make theirs, whose log is the process's log
    file in ``log_dir``."""
    pods = []
    for process in ("worker", "watcher"):
        path = tools.REPO_ROOT / "deploy" / "base" / f"{process}.yaml"
        (deployment,) = [
            d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "Deployment"
        ]
        template = deployment["spec"]["template"]
        (container,) = template["spec"]["containers"]
        labels = template["metadata"]["labels"]
        log = log_dir / f"{process}.log"
        pods.append(Pod(f"dbi-{process}-{suffix}", labels, container["name"], log))
    return pods


@contextmanager
def serving(
    api: k8s.ApiClient, namespace: str, pods: list[Pod], node: str | None = None
) -> Iterator[str]:
    """``pods`` in ``namespace``, their logs served, for the ``with`` block, on ``node``
    (default: a new name); the Node's name. Pods and a Node of the same names left by a
    stand-in that was killed are replaced."""
    logs = {(namespace, p.name, p.container): p.log for p in pods}
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(logs))
    with tempfile.TemporaryDirectory(prefix="dbi-kubelet-") as directory:
        server.socket = _tls(Path(directory)).wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    core = k8s.CoreV1Api(api)
    node = node or f"dbi-dev-node-{secrets.token_hex(3)}"
    try:
        _remove(core, namespace, pods, node)
        core.create_node(k8s.V1Node(metadata=k8s.V1ObjectMeta(name=node)))
        endpoint = {"kubeletEndpoint": {"Port": server.server_address[1]}}
        address = [{"type": "InternalIP", "address": "127.0.0.1"}]
        core.patch_node_status(
            node, {"status": {"addresses": address, "daemonEndpoints": endpoint}}
        )
        _account(core, namespace)
        for pod in pods:
            core.create_namespaced_pod(namespace, _pod(pod, node))
        yield node
    finally:
        _remove(core, namespace, pods, node)
        server.shutdown()
        server.server_close()


def _remove(core: k8s.CoreV1Api, namespace: str, pods: list[Pod], node: str) -> None:
    for pod in pods:  # at once: no kubelet confirms a graceful deletion
        _gone(lambda p=pod: core.delete_namespaced_pod(p.name, namespace, grace_period_seconds=0))
    _gone(lambda: core.delete_node(node))


def _pod(pod: Pod, node: str) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(name=pod.name, labels=pod.labels),
        spec=k8s.V1PodSpec(
            node_name=node,
            automount_service_account_token=False,
            containers=[k8s.V1Container(name=pod.container, image="dbi")],
        ),
    )


def _account(core: k8s.CoreV1Api, namespace: str) -> None:
    """The namespace's ``default`` ServiceAccount, which a Pod's admission looks up (the
    local stack runs no controller that makes it)."""
    try:
        account = k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
        core.create_namespaced_service_account(namespace, account)
    except k8s.ApiException as e:
        if e.status != 409:
            raise


def _gone(delete: Any) -> None:
    try:
        delete()
    except k8s.ApiException as e:
        if e.status != 404:
            raise


def _tls(directory: Path) -> ssl.SSLContext:
    """A server context with a throwaway certificate for localhost."""
    pair = tls.issue(tls.new_ca("kubelet stand-in"), ["localhost"])
    cert, key = directory / "cert.pem", directory / "key.pem"
    cert.write_text(pair.cert_pem)
    key.write_text(pair.key_pem)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return context


def _handler(logs: dict[tuple[str, str, str], Path]) -> type[BaseHTTPRequestHandler]:
    class Kubelet(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urllib.parse.urlsplit(self.path)
            found = _LOGS.match(url.path)
            path = logs.get(found.groups()) if found else None  # type: ignore[arg-type]
            if path is None:
                self.send_error(404, "no such container")
                return
            data = path.read_bytes() if path.exists() else b""
            tail = urllib.parse.parse_qs(url.query).get("tailLines")
            if tail:
                lines = data.splitlines(keepends=True)
                data = b"".join(lines[-int(tail[0]) :]) if int(tail[0]) else b""
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the tests' output stays theirs

    return Kubelet


def main() -> None:
    """Serve the worker's and the watcher's logs (files in --log-dir) as Pods'
    ``dbi-worker-dev`` and ``dbi-watcher-dev`` in --namespace until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m devstack.kubelet")
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--log-dir", type=Path, required=True)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    api = connect.kubernetes(args.kubeconfig)
    pods = orchestrator_pods("dev", args.log_dir)
    with serving(api, args.namespace, pods, node="dbi-dev-node"):
        print(f"serving the logs of {', '.join(p.name for p in pods)}", flush=True)
        with suppress(KeyboardInterrupt):
            signal.pause()


if __name__ == "__main__":
    main()
