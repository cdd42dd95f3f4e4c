"""The hostile-tenant suite's fixture: dbi installed from its chart, serving two tenants'
namespaces, and one of those tenants as an attacker holds it.

The worker and the watcher run as deploy/'s ServiceAccounts (``scoped_install``);
Mallory is a ServiceAccount of her own namespace with Kubernetes' ``edit`` role bound
there and nothing else, which grants DBInstances through dbi's aggregated ``dbi-edit``
(deploy/base/tenants.yaml). The other namespace is the victim's: its instances are
made by the cluster's admin, and every test checks that nothing of it moved.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from dbi import environment, names
from devstack.stack import StackInfo
from tests.deployment import Scoped, scoped_install, service_account_kubeconfig
from tests.polling import eventually
from tests.stack import Kubectl, kubectl_as

ATTACKER = "mallory"


@dataclass
class Tenancy:
    installed: Scoped
    admin: Kubectl  # the cluster's admin
    tenant: Kubectl  # Mallory: edit in her namespace, nothing else

    @property
    def home(self) -> str:
        """dbi's namespace: admin credentials, CAs."""
        return self.installed.home

    @property
    def mallory(self) -> str:
        """The attacker's namespace."""
        return self.installed.served[0]

    @property
    def victim(self) -> str:
        """The other tenant's namespace."""
        return self.installed.served[1]

    def get(self, namespace: str, name: str, kind: str = "dbinstance") -> dict[str, Any]:
        """An object as the admin reads it (``namespace`` empty: a cluster-scoped one)."""
        where = ["-n", namespace] if namespace else []
        out = self.admin("get", kind, name, *where, "-o", "json").stdout
        return dict(json.loads(out))

    def secret(self, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's data as the admin reads it; None when there is none."""
        found = self.admin("get", "secret", name, "-n", namespace, "-o", "json", check=False)
        if found.returncode != 0:
            return None
        data = json.loads(found.stdout).get("data") or {}
        return {k: base64.b64decode(v).decode() for k, v in data.items()}

    def condition(self, namespace: str, name: str, kind: str) -> dict[str, Any] | None:
        for found in self.get(namespace, name).get("status", {}).get("conditions", []):
            if found["type"] == kind:
                return dict(found)
        return None

    def stalled(self, namespace: str, name: str, *, timeout: float = 120) -> dict[str, Any]:
        """Wait until the instance is Stalled (a Terminal step); return the condition."""

        def found() -> dict[str, Any] | None:
            stalled = self.condition(namespace, name, "Stalled")
            return stalled if stalled is not None and stalled["status"] == "True" else None

        return dict(self.until(found, what=f"{namespace}/{name} Stalled", timeout=timeout))

    def ready(self, namespace: str, name: str, *, timeout: int = 240) -> dict[str, Any]:
        """``kubectl wait --for=condition=Ready`` as the admin; the instance then."""
        done = self.admin(
            "wait",
            "--for=condition=Ready",
            f"dbinstance/{name}",
            "-n",
            namespace,
            f"--timeout={timeout}s",
            check=False,
        )
        assert done.returncode == 0, (done.stderr, self.installed.tails())
        return self.get(namespace, name)

    def backups(self, namespace: str) -> dict[str, dict[str, Any]]:
        """The namespace's DBBackups by name, as the admin reads them."""
        out = self.admin("get", "dbbackups", "-n", namespace, "-o", "json").stdout
        return {b["metadata"]["name"]: b for b in json.loads(out)["items"]}

    def until(self, check: Any, *, what: str, timeout: float = 120) -> Any:
        try:
            return eventually(check, timeout=timeout, what=what)
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.installed.tails()}") from None

    async def until_async(
        self, done: Callable[[], Awaitable[Any]], *, what: str, timeout: float = 180
    ) -> Any:
        """Await ``done()`` for at most ``timeout`` seconds (the logs' ends if not)."""
        try:
            return await asyncio.wait_for(done(), timeout)
        except TimeoutError:
            raise AssertionError(
                f"{what}: not within {timeout}s\n{self.installed.tails()}"
            ) from None


def instance(name: str, *, annotations: dict[str, str] | None = None, **spec_fields: Any) -> str:
    """A DBInstance manifest (JSON) with the sample's spec and ``spec_fields``."""
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = annotations
    spec = {
        "version": 18,
        "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
        **spec_fields,
    }
    return json.dumps(
        {"apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": metadata, "spec": spec}
    )


@pytest.fixture(scope="session")
def tenancy(
    local_stack: StackInfo,
    kubectl: Kubectl,
    images: dict[int, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Tenancy]:
    log_dir = tmp_path_factory.mktemp("tenancy")
    # As deploy/ ships it: a tenant's backup endpoint reaches public addresses only.
    worker_env = {environment.BACKUP_ALLOWED_NETWORKS.name: ""}
    with scoped_install(
        kubectl,
        local_stack,
        log_dir,
        tenants=("tenant-mallory", "tenant-victim"),
        worker_env=worker_env,
    ) as installed:
        mallory = installed.served[0]
        kubectl("create", "serviceaccount", ATTACKER, "-n", mallory)
        kubectl(
            "create",
            "rolebinding",
            f"{ATTACKER}-edit",
            "-n",
            mallory,
            "--clusterrole=edit",
            f"--serviceaccount={mallory}:{ATTACKER}",
        )
        config = log_dir / f"{ATTACKER}.kubeconfig"
        service_account_kubeconfig(kubectl, local_stack, ATTACKER, config, namespace=mallory)
        tenant = kubectl_as(local_stack, config)
        # ClusterRole aggregation puts dbi-edit into edit within a moment.
        eventually(
            lambda: (
                tenant(
                    "auth", "can-i", "create", "dbinstances.dbi.dev", "-n", mallory, check=False
                ).returncode
                == 0
            ),
            what="Mallory's edit role to grant DBInstances",
        )
        yield Tenancy(installed=installed, admin=kubectl, tenant=tenant)
