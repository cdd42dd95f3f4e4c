"""Fixtures and checks for what deploy/ and docker-compose.yml run.

``deploy_manifests`` is deploy/cluster-wide as kustomize renders it; ``deployed_rbac`` applies its
namespace, ServiceAccounts and RBAC to the local control plane for real (and deletes
them at the end); ``service_account_kubeconfig`` writes a kubeconfig that
authenticates as one of those ServiceAccounts, with a token from the TokenRequest API.
"""

from __future__ import annotations

import shlex
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from commands.main import build_parser
from dbi import environment
from devstack.stack import StackInfo
from tests.stack import Kubectl

SYSTEM_NAMESPACE = "dbi-system"
RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
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
