"""dbi installed from its Helm chart serving two namespaces, as a platform team installs
it (the chart renders what deploy/namespaced does: tests/test_chart.py): the worker and
the watcher authenticate as ServiceAccounts whose roles are bound in two namespaces only
(plus the one ClusterRoleBinding for volumes); an instance in each becomes Ready, and an
instance in a third namespace is never touched."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dbi import environment, names
from devstack.stack import StackInfo
from tests.appclient import conninfo
from tests.deployment import Scoped, deployment_env, overlay, scoped_install
from tests.journeys.product import NAME, sql
from tests.stack import Kubectl

pytestmark = pytest.mark.stack


@dataclass
class Served:
    installed: Scoped  # the chart, serving two namespaces
    other: str  # a namespace it does not serve

    @property
    def served(self) -> list[str]:
        return self.installed.served

    @property
    def logs(self) -> list[Path]:
        return self.installed.logs

    def tails(self) -> str:
        return self.installed.tails()


@pytest.fixture(scope="module")
def scoped(
    local_stack: StackInfo,
    kubectl: Kubectl,
    images: dict[int, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Served]:
    with scoped_install(
        kubectl,
        local_stack,
        tmp_path_factory.mktemp("scoped"),
        tenants=("scoped-a", "scoped-b"),
    ) as installed:
        other = f"scoped-c-{installed.token}"
        kubectl("create", "namespace", other)
        try:
            yield Served(installed, other)
        finally:
            kubectl("delete", "namespace", "--wait=false", other)


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
    scoped: Served, kubectl: Kubectl, repo_root: Path, temporal_client: Client
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
