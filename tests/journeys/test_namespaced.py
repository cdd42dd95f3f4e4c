"""deploy/namespaced as a platform team installs it: the worker and the watcher
authenticate as ServiceAccounts whose roles are bound in two namespaces only (plus the
one ClusterRoleBinding for volumes); an instance in each becomes Ready, and an instance
in a third namespace is never touched."""

from __future__ import annotations

import base64
import json
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dbi import environment, names
from devstack.orchestrator import OrchestratorProcesses
from devstack.process import tail
from devstack.stack import StackInfo
from tests.appclient import conninfo
from tests.deployment import RBAC_KINDS, service_account_kubeconfig
from tests.journeys.product import NAME, sql
from tests.stack import Kubectl

pytestmark = pytest.mark.stack

CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding")
ROLES_AND_BINDINGS = (*CLUSTER_SCOPED, "Role", "RoleBinding")


@dataclass
class Scoped:
    served: list[str]  # the namespaces the overlay's RoleBindings name
    other: str  # a namespace it does not
    logs: list[Path]

    def tails(self) -> str:
        return "\n".join(f"--- {log}\n{tail(log)}" for log in self.logs)


def overlay(kubectl: Kubectl, repo_root: Path, renames: dict[str, str], suffix: str) -> list[Any]:
    """deploy/namespaced as kustomize renders it, with its namespaces renamed (whole
    words, also inside DBI_WATCH_NAMESPACES) and a suffix on the names of its roles and
    bindings, so that it neither borrows the rights of the cluster-wide install other
    tests apply nor leaves a binding behind that another test's apply would collide
    with (one lives in dbi-images, which outlives this test)."""
    text = kubectl("kustomize", str(repo_root / "deploy" / "namespaced")).stdout
    for before, after in renames.items():
        text = re.sub(rf"(?<![\w-]){re.escape(before)}(?![\w-])", after, text)
    docs = [d for d in yaml.safe_load_all(text) if d]
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


@pytest.fixture(scope="module")
def scoped(
    local_stack: StackInfo,
    kubectl: Kubectl,
    images: dict[int, str],
    repo_root: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scoped]:
    token = secrets.token_hex(3)
    home = f"dbi-scoped-{token}"
    served = [f"scoped-a-{token}", f"scoped-b-{token}"]
    other = f"scoped-c-{token}"
    for namespace in (home, *served, other):
        kubectl("create", "namespace", namespace)
    docs = overlay(
        kubectl,
        repo_root,
        {"dbi-system": home, "team-a": served[0], "team-b": served[1]},
        f"-{token}",
    )
    rbac = yaml.safe_dump_all([d for d in docs if d["kind"] in RBAC_KINDS])
    kubectl("apply", "--server-side", "--field-manager=dbi-tests", "-f", "-", stdin=rbac)
    log_dir = tmp_path_factory.mktemp("scoped")
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
            },
            "watcher": {
                environment.KUBECONFIG.name: str(kubeconfigs["watcher"]),
                environment.TASK_QUEUE.name: queue,
                environment.TRACES_EXPORTER.name: "none",
                # What the overlay sets, renamed: the two served namespaces.
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
        yield Scoped(served, other, [log_dir / "worker.log", log_dir / "watcher.log"])
    finally:
        orchestrator.stop()
        kubectl("delete", "namespace", "--wait=false", home, *served, other)
        bindings = yaml.safe_dump_all([d for d in docs if d["kind"] in ROLES_AND_BINDINGS])
        kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", stdin=bindings)


def test_the_overlay_watches_two_namespaces_and_binds_no_tenant_role_cluster_wide(
    kubectl: Kubectl, repo_root: Path
) -> None:
    """deploy/namespaced as shipped: the watcher and the worker watch team-a and team-b,
    every role on tenants' objects is bound there by a RoleBinding, and the one
    ClusterRoleBinding grants volumes and classes alone."""
    docs = overlay(kubectl, repo_root, {}, "")
    for deployment in ("dbi-watcher", "dbi-worker"):
        value = deployment_env(docs, deployment, environment.WATCH_NAMESPACES.name)
        assert value == "team-a,team-b", deployment
    bindings = [d for d in docs if d["kind"] == "RoleBinding"]
    for namespace in ("team-a", "team-b"):
        bound = {b["roleRef"]["name"] for b in bindings if b["metadata"]["namespace"] == namespace}
        assert bound == {"dbi-worker", "dbi-watcher"}, (namespace, bound)
    (cluster_wide,) = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert cluster_wide["roleRef"]["name"] == "dbi-worker-volumes"
    (volumes,) = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dbi-worker-volumes"
    ]
    granted = {r for rule in volumes["rules"] for r in rule["resources"]}
    assert granted == {"persistentvolumes", "storageclasses"}


async def test_instances_in_the_served_namespaces_become_ready_and_a_third_is_untouched(
    scoped: Scoped, kubectl: Kubectl, repo_root: Path, temporal_client: Client
) -> None:
    """The sample in each served namespace becomes Ready and its Secret connects; the
    same sample in the third namespace gets no finalizer, no status and no workflow;
    neither process was refused anything."""
    sample = str(repo_root / "deploy" / "samples" / "dbinstance.yaml")
    for namespace in (*scoped.served, scoped.other):
        kubectl("apply", "-n", namespace, "-f", sample)
    for namespace in scoped.served:
        result = kubectl(
            "wait",
            "--for=condition=Ready",
            f"dbinstance/{NAME}",
            "-n",
            namespace,
            "--timeout=240s",
            check=False,
        )
        assert result.returncode == 0, (result.stderr, scoped.tails())
        secret = json.loads(
            kubectl("get", "secret", f"{NAME}-credentials", "-n", namespace, "-o", "json").stdout
        )
        data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
        assert sql(conninfo(data), "SELECT current_user") == ("orders",)
    # The third namespace's instance: no finalizer, no status, no workflow.
    untouched = json.loads(
        kubectl("get", "dbinstance", NAME, "-n", scoped.other, "-o", "json").stdout
    )
    status = untouched.get("status", {})  # the CRD defaults observedGeneration alone
    assert "phase" not in status and "conditions" not in status, status
    assert names.FINALIZER not in untouched["metadata"].get("finalizers", [])
    handle = temporal_client.get_workflow_handle(names.workflow_id(scoped.other, NAME))
    with pytest.raises(RPCError) as missing:
        await handle.describe()
    assert missing.value.status is RPCStatusCode.NOT_FOUND
    # Nothing the processes did was refused (the worker's views' lists and watches
    # included: "cannot list … (403 Forbidden)"): the roles are enough.
    for log in scoped.logs:
        assert "Forbidden" not in log.read_text(), scoped.tails()
