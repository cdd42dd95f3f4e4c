"""The journeys' fixture: the product as a user meets it.

`dbi worker` and `dbi watcher` run as processes that authenticate as deploy/'s
ServiceAccounts (so its RBAC is shown to be enough); the tests drive them only through
kubectl, the temporal CLI, the dbi CLI and psycopg.
"""

from __future__ import annotations

import base64
import contextlib
import json
import secrets
import socket
import subprocess
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dbi import connect, environment
from devstack import kubelet, tools
from devstack.orchestrator import OrchestratorProcesses
from devstack.process import tail
from devstack.stack import StackInfo
from images.recipe import EXPORTER_PORT
from tests import dbi_command
from tests.appclient import conninfo
from tests.deployment import SYSTEM_NAMESPACE, service_account_kubeconfig
from tests.polling import eventually
from tests.stack import Kubectl

JOURNEYS = ("create", "power", "resize", "rotate", "delete", "qemu", "qemu-restore")
NAME = "orders"  # deploy/samples/dbinstance.yaml


@dataclass
class Product:
    kubectl: Kubectl
    local_stack: StackInfo
    namespaces: dict[str, str]  # journey -> its namespace (the watcher watches these)
    sample: Path
    logs: list[Path]
    metrics: dict[str, str]  # process -> its /metrics URL
    queue: str  # the journeys' worker's task queue (DBI_TASK_QUEUE)

    def temporal(self, *args: str) -> str:
        """Run the temporal CLI against the stack's Temporal; return its stdout."""
        result = subprocess.run(
            [
                str(tools.venv_tool("temporal")),
                *args,
                "--address",
                self.local_stack.temporal_address,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def dbi(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run the dbi CLI as an operator does (the admin's kubeconfig, the task queue
        the journeys' worker polls)."""
        return dbi_command.dbi(self.local_stack, *args, **{environment.TASK_QUEUE.name: self.queue})

    def get(self, namespace: str, kind: str = "dbinstance", name: str = NAME) -> dict[str, Any]:
        return dict(
            json.loads(self.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout)
        )

    def wait(self, namespace: str, condition: str, *, timeout: int = 240, name: str = NAME) -> None:
        """``kubectl wait --for=<condition>`` on the instance; the logs' ends on failure."""
        result = self.kubectl(
            "wait",
            f"--for={condition}",
            f"dbinstance/{name}",
            "-n",
            namespace,
            f"--timeout={timeout}s",
            check=False,
        )
        assert result.returncode == 0, (result.stderr, self.tails())

    def converged(self, namespace: str, *, timeout: int = 240) -> dict[str, Any]:
        """Wait as the user guide says (``kubectl wait --for=condition=Ready``, which waits
        for the current generation); the instance is converged at it."""
        generation = self.get(namespace)["metadata"]["generation"]
        self.wait(namespace, "condition=Ready", timeout=timeout)
        db = self.get(namespace)
        assert db["status"]["convergedGeneration"] >= generation, db["status"]
        return db

    def uri(self, namespace: str, name: str = NAME) -> str:
        """The connection URI from the credentials Secret, as a user reads it, with the
        Secret's ca.crt as the root certificate (an app's PGSSLROOTCERT)."""
        db = self.get(namespace, name=name)
        out = self.kubectl(
            "get",
            "secret",
            db["status"]["credentialsSecretName"],
            "-n",
            namespace,
            "-o",
            "json",
        ).stdout
        data = {k: base64.b64decode(v).decode() for k, v in json.loads(out)["data"].items()}
        assert {"uri", "ca.crt"} <= data.keys(), "the Secret has no uri and ca.crt yet"
        return conninfo(data)

    def until(self, check: Callable[[], Any], *, what: str, timeout: float = 120) -> Any:
        """``tests.polling.eventually``, with the ends of the orchestrator's logs on failure."""
        try:
            return eventually(check, timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.tails()}") from None

    def tails(self) -> str:
        return "\n".join(f"--- {log}\n{tail(log)}" for log in self.logs)


def host_address() -> str | None:
    """This machine's address on its network (the route out's source), which a VM behind
    qemu's user networking reaches the host's servers at; None without one."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("10.255.255.255", 9))  # no packet is sent: it picks the source address
        address = str(s.getsockname()[0])
        return None if address.startswith("127.") else address
    return None


def metrics(product: Product, namespace: str) -> str:
    """What the instance's exporter serves, through its metrics Service."""
    service = product.get(namespace, "service", f"{NAME}-metrics")
    url = f"http://{service['spec']['clusterIP']}:{EXPORTER_PORT}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def reading(product: Product, namespace: str) -> str | None:
    """The exporter's metrics once it reads the server (``pg_up 1``), else None."""
    with contextlib.suppress(OSError):  # not listening yet: the VM is booting
        text = metrics(product, namespace)
        return text if "pg_up 1" in text else None
    return None


def sql(uri: str, statement: str) -> Any:
    """Run one statement; return the first row, if it returns rows."""
    with psycopg.connect(uri, connect_timeout=3, autocommit=True) as conn:
        cursor = conn.execute(statement.encode())
        return cursor.fetchone() if cursor.description else None


def rows(product: Product, namespace: str) -> int:
    return int(sql(product.uri(namespace), "SELECT count(*) FROM orders")[0])


def patch(product: Product, namespace: str, spec: dict[str, object]) -> None:
    body = json.dumps({"spec": spec})
    product.kubectl("patch", "dbinstance", NAME, "-n", namespace, "--type=merge", "-p", body)


@pytest.fixture(scope="session")
def product(
    local_stack: StackInfo,
    kubectl: Kubectl,
    images: dict[int, str],
    deployed_rbac: list[dict[str, Any]],
    repo_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Product]:
    """Run the worker and the watcher as deploy/'s ServiceAccounts, for the journeys."""
    home = tmp_path_factory.mktemp("journeys")
    token = secrets.token_hex(3)
    namespaces = {j: f"journey-{j}-{token}" for j in JOURNEYS}
    for namespace in namespaces.values():
        kubectl("create", "namespace", namespace)
    queue = f"dbi-journeys-{token}"
    kubeconfigs = {
        process: service_account_kubeconfig(
            kubectl, local_stack, f"dbi-{process}", home / f"{process}.kubeconfig"
        )
        for process in ("worker", "watcher")
    }
    orchestrator = OrchestratorProcesses(
        kubeconfig=kubeconfigs["worker"],
        temporal_address=local_stack.temporal_address,
        log_dir=home,
        die_with_parent=True,
        env={
            "worker": {
                environment.KUBECONFIG.name: str(kubeconfigs["worker"]),
                environment.TASK_QUEUE.name: queue,
                environment.TRACES_EXPORTER.name: "none",  # logs a failure can show
                # Buckets on this machine: on loopback, and on its own address, where a
                # real VM reaches them (tests/journeys/test_real_vm.py).
                environment.BACKUP_ALLOWED_NETWORKS.name: ",".join(
                    ["127.0.0.0/8", *(f"{a}/32" for a in [host_address()] if a)]
                ),
            },
            "watcher": {
                environment.KUBECONFIG.name: str(kubeconfigs["watcher"]),
                environment.TRACES_EXPORTER.name: "none",
                environment.TASK_QUEUE.name: queue,
                environment.WATCH_NAMESPACES.name: ",".join(namespaces.values()),
                environment.LEASE_NAMESPACE.name: SYSTEM_NAMESPACE,
                environment.POD_NAME.name: f"journeys-{token}",
            },
        },
    )
    orchestrator.start(install_api=False)
    # Their logs, as pods' logs: what `dbi logs` reads through the API server.
    api = connect.kubernetes(str(local_stack.kubeconfig))
    pods = kubelet.orchestrator_pods(token, home)
    try:
        with kubelet.serving(api, SYSTEM_NAMESPACE, pods):
            yield Product(
                kubectl=kubectl,
                local_stack=local_stack,
                namespaces=namespaces,
                sample=repo_root / "deploy" / "samples" / "dbinstance.yaml",
                logs=[home / "worker.log", home / "watcher.log"],
                metrics=orchestrator.metrics,
                queue=queue,
            )
    finally:
        orchestrator.stop()
        kubectl("delete", "namespace", "--wait=false", *namespaces.values())
