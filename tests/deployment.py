"""Fixtures and checks for what deploy/ and docker-compose.yml run.

``deploy_manifests`` is deploy/cluster-wide as kustomize renders it; ``deployed_rbac`` applies its
namespace, ServiceAccounts and RBAC to the local control plane for real (and deletes
them at the end); ``service_account_kubeconfig`` writes a kubeconfig that
authenticates as one of those ServiceAccounts, with a token from the TokenRequest API;
``scoped_install`` installs the Helm chart (charts/dbi) for real, serving namespaces of
its own, and runs the worker and the watcher as its ServiceAccounts.
"""

from __future__ import annotations

import re
import secrets
import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.main import build_parser
from dbi import environment
from devstack import helm
from devstack.orchestrator import OrchestratorProcesses
from devstack.process import tail
from devstack.stack import StackInfo
from tests.stack import Kubectl

SYSTEM_NAMESPACE = "dbi-system"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
ROLES_AND_BINDINGS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
Manifest = dict[str, Any]


@pytest.fixture(scope="session")
def deploy_manifests(kubectl: Kubectl, repo_root: Path) -> list[Manifest]:
    """deploy/cluster-wide rendered by kubectl's kustomize."""
    out = kubectl("kustomize", str(repo_root / "deploy" / "cluster-wide")).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.fixture(scope="session")
def deployed_rbac(
    kubectl: Kubectl, deploy_manifests: list[Manifest], dbinstance_crd: str
) -> Iterator[list[Manifest]]:
    """Apply deploy/'s namespace and RBAC for real; yield the objects; delete them after."""
    chosen = [m for m in deploy_manifests if m["kind"] in ("Namespace", *RBAC_KINDS)]
    text = yaml.safe_dump_all(chosen)
    kubectl("apply", "--server-side", "--field-manager=dbi-tests", "-f", "-", stdin=text)
    try:
        yield chosen
    finally:
        kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=text)


def service_account_kubeconfig(
    kubectl: Kubectl,
    local_stack: StackInfo,
    account: str,
    path: Path,
    *,
    namespace: str = SYSTEM_NAMESPACE,
) -> Path:
    """Write a kubeconfig at ``path`` that authenticates as ``<namespace>/<account>``."""
    token = kubectl("create", "token", account, "-n", namespace, "--duration=2h").stdout.strip()
    config = yaml.safe_load(Path(local_stack.kubeconfig).read_text())
    for user in config["users"]:
        user["user"] = {"token": token}
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return path


def can_i(kubectl: Kubectl, account: str, verb: str, resource: str, namespace: str) -> bool:
    """``kubectl auth can-i`` as the ServiceAccount: True for yes, False for no."""
    result = kubectl(
        "auth",
        "can-i",
        verb,
        *resource.split(),  # "TYPE[/NAME] [--subresource=S]"
        "-n",
        namespace,
        f"--as=system:serviceaccount:{SYSTEM_NAMESPACE}:{account}",
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode == 0


def permission_errors(
    kubectl: Kubectl, account: str, expected: list[tuple[str, str, str]], allowed: bool
) -> list[str]:
    """Return each ``verb resource -n namespace`` whose answer is not ``allowed``."""
    return [
        f"{verb} {resource} -n {namespace}"
        for verb, resource, namespace in expected
        if can_i(kubectl, account, verb, resource, namespace) is not allowed
    ]


def project_version(repo_root: Path) -> str:
    with (repo_root / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def entrypoint(repo_root: Path) -> list[str]:
    """The Dockerfile's ENTRYPOINT, in its JSON form."""
    for line in (repo_root / "Dockerfile").read_text().splitlines():
        if line.startswith("ENTRYPOINT "):
            return list(yaml.safe_load(line.removeprefix("ENTRYPOINT ")))
    raise AssertionError("the Dockerfile has no ENTRYPOINT")


def container_problems(repo_root: Path, image: str, command: list[str], env: set[str]) -> list[str]:
    """What is wrong with a container that runs the dbi image with ``command`` (its args
    after the ENTRYPOINT) and the variables ``env``; empty when nothing is."""
    problems = []
    if image != f"dbi:{project_version(repo_root)}":
        problems.append(f"image {image}, not dbi:{project_version(repo_root)}")
    if entrypoint(repo_root) != ["dbi"]:
        problems.append("the image's ENTRYPOINT is not dbi")
    args = build_parser().parse_args(command)
    process = getattr(args, "process", None)
    if process is None:
        return [*problems, f"`dbi {shlex.join(command)}` is not the worker or the watcher"]
    if unknown := env - environment.read_by(process):
        problems.append(f"the {process} reads none of {sorted(unknown)}")
    return problems


def server_dry_run(
    kubectl: Kubectl, directory: Path, *flags: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --server-side --dry-run=server -k directory``: what the API server
    would accept of a kustomization, without changing anything."""
    return kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        *flags,
        "--field-manager=dbi-deploy-test",
        "-k",
        str(directory),
    )


def overlay(kubectl: Kubectl, repo_root: Path, renames: dict[str, str], suffix: str) -> list[Any]:
    """deploy/namespaced as kustomize renders it, with its namespaces renamed (whole
    words, also inside DBI_WATCH_NAMESPACES) and a suffix on the names of its roles and
    bindings, so that it neither borrows the rights of the cluster-wide install other
    tests apply nor leaves a binding behind that another test's apply would collide
    with (one lives in dbi-images, which outlives the test)."""
    text = kubectl("kustomize", str(repo_root / "deploy" / "namespaced")).stdout
    for before, after in renames.items():
        text = re.sub(rf"(?<![\w-]){re.escape(before)}(?![\w-])", after, text)
    return _suffixed([d for d in yaml.safe_load_all(text) if d], suffix)


def chart(namespace: str, served: list[str], suffix: str) -> list[Any]:
    """charts/dbi as ``helm template`` renders it into ``namespace``, serving ``served``,
    with ``suffix`` on the names of its roles and bindings (for the reasons ``overlay``
    gives)."""
    text = helm.template(namespace, "--set", f"watchNamespaces={{{','.join(served)}}}")
    return _suffixed([d for d in yaml.safe_load_all(text) if d], suffix)


def _suffixed(docs: list[Any], suffix: str) -> list[Any]:
    for doc in docs:
        if doc["kind"] in ROLES_AND_BINDINGS:
            doc["metadata"]["name"] += suffix
        if "roleRef" in doc:
            doc["roleRef"]["name"] += suffix
    return docs


def deployment_env(docs: list[Any], deployment_name: str, name: str) -> str:
    """The value the overlay's Deployment ``deployment_name`` gives the variable ``name``."""
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == deployment_name
    ]
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    (value,) = [e["value"] for e in env if e["name"] == name]
    return str(value)


@dataclass
class Scoped:
    """The chart installed for real: dbi's namespace (``home``), the two it serves, each
    named with ``token``."""

    token: str
    home: str
    served: list[str]
    logs: list[Path]
    queue: str  # the task queue the worker polls

    def tails(self) -> str:
        return "\n".join(f"--- {log}\n{tail(log)}" for log in self.logs)


@contextmanager
def scoped_install(
    kubectl: Kubectl,
    local_stack: StackInfo,
    log_dir: Path,
    *,
    tenants: tuple[str, str],
    worker_env: dict[str, str] | None = None,
) -> Iterator[Scoped]:
    """Install the chart into dbi's namespace ``dbi-scoped-<token>`` serving
    ``<tenant>-<token>`` for both ``tenants`` (namespaces created here), and run the worker
    and the watcher as its ServiceAccounts, on a task queue of their own (the worker with
    ``worker_env`` too); remove all of it at the end. There is no container runtime here:
    its RBAC is applied for real, and the processes run on this machine with the
    ServiceAccounts' tokens and the variables its Deployments set."""
    token = secrets.token_hex(3)
    home = f"dbi-scoped-{token}"
    served = [f"{tenant}-{token}" for tenant in tenants]
    for namespace in (home, *served):
        kubectl("create", "namespace", namespace)
    docs = chart(home, served, f"-{token}")
    rbac = yaml.safe_dump_all([d for d in docs if d["kind"] in RBAC_KINDS])
    kubectl("apply", "--server-side", "--field-manager=dbi-tests", "-f", "-", stdin=rbac)
    kubeconfigs = {
        process: service_account_kubeconfig(
            kubectl,
            local_stack,
            f"dbi-{process}",
            log_dir / f"{process}.kubeconfig",
            namespace=home,
        )
        for process in ("worker", "watcher")
    }
    queue = f"dbi-scoped-{token}"
    orchestrator = OrchestratorProcesses(
        kubeconfig=kubeconfigs["worker"],
        temporal_address=local_stack.temporal_address,
        log_dir=log_dir,
        die_with_parent=True,
        env={
            "worker": {
                environment.KUBECONFIG.name: str(kubeconfigs["worker"]),
                environment.NAMESPACE.name: home,
                environment.TASK_QUEUE.name: queue,
                environment.TRACES_EXPORTER.name: "none",
                # The worker's views watch the served namespaces too.
                environment.WATCH_NAMESPACES.name: deployment_env(
                    docs, "dbi-worker", environment.WATCH_NAMESPACES.name
                ),
                **(worker_env or {}),
            },
            "watcher": {
                environment.KUBECONFIG.name: str(kubeconfigs["watcher"]),
                environment.TASK_QUEUE.name: queue,
                environment.TRACES_EXPORTER.name: "none",
                # What the chart sets: the two served namespaces.
                environment.WATCH_NAMESPACES.name: deployment_env(
                    docs, "dbi-watcher", environment.WATCH_NAMESPACES.name
                ),
                environment.LEASE_NAMESPACE.name: home,
                environment.POD_NAME.name: f"scoped-{token}",
            },
        },
    )
    orchestrator.start(install_api=False)
    try:
        logs = [log_dir / "worker.log", log_dir / "watcher.log"]
        yield Scoped(token, home, served, logs, queue)
    finally:
        orchestrator.stop()
        kubectl("delete", "namespace", "--wait=false", home, *served)
        bindings = yaml.safe_dump_all([d for d in docs if d["kind"] in ROLES_AND_BINDINGS])
        kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=bindings)
