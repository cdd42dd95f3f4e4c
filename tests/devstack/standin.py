"""The VM stand-in's VMs as a test drives them, and a connection to a guest."""

from __future__ import annotations

from typing import Any, cast

import psycopg
from kubernetes import client as k8s
from pydantic import SecretStr

from dbi.bootstrap import Bootstrap, to_userdata
from tests.polling import eventually

PASSWORD = "bootstrap-admin-pw"  # noqa: S105 (a test VM's bootstrap password)


KUBEVIRT = ("kubevirt.io", "v1")


class VMs:
    """Create and inspect stand-in VMs in one namespace, as the orchestrator would."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.core = k8s.CoreV1Api(api)
        self.objects = k8s.CustomObjectsApi(api)
        self.api = api
        self.namespace = namespace

    def create(
        self,
        name: str,
        *,
        strategy: str = "Always",
        sockets: int = 1,
        storage: str = "1Gi",
        volume: str | None = None,
    ) -> None:
        """Create a VM with its cloud-init Secret and data claim (for ``volume``, if named)."""
        userdata = to_userdata(Bootstrap(admin_password=SecretStr(PASSWORD)))
        meta = k8s.V1ObjectMeta(name=f"{name}-cloudinit")
        self.core.create_namespaced_secret(
            self.namespace, k8s.V1Secret(metadata=meta, string_data={"userdata": userdata})
        )
        claim = k8s.V1PersistentVolumeClaim(
            metadata=k8s.V1ObjectMeta(name=f"{name}-data"),
            spec=k8s.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=k8s.V1VolumeResourceRequirements(requests={"storage": storage}),
                volume_name=volume,
            ),
        )
        self.core.create_namespaced_persistent_volume_claim(self.namespace, claim)
        vm = {
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": {"name": name},
            "spec": {
                "runStrategy": strategy,
                "template": {
                    "metadata": {"labels": {"dbi.dev/instance": name}},
                    "spec": {
                        "domain": {
                            "cpu": {"sockets": sockets, "cores": 1, "threads": 1, "maxSockets": 4},
                            "memory": {"guest": "1Gi", "maxGuest": "4Gi"},
                            "devices": {},
                        },
                        "volumes": [
                            {
                                "name": "data",
                                "persistentVolumeClaim": {"claimName": f"{name}-data"},
                            },
                            {
                                "name": "cloudinit",
                                "cloudInitNoCloud": {"secretRef": {"name": f"{name}-cloudinit"}},
                            },
                        ],
                    },
                },
            },
        }
        self.objects.create_namespaced_custom_object(
            *KUBEVIRT, self.namespace, "virtualmachines", vm
        )

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            found = self.objects.get_namespaced_custom_object(
                *KUBEVIRT, self.namespace, plural, name
            )
        except k8s.ApiException as e:
            if e.status == 404:
                return None
            raise
        return cast(dict[str, Any], found)

    def patch(self, name: str, body: dict[str, Any]) -> None:
        self.objects.patch_namespaced_custom_object(
            *KUBEVIRT, self.namespace, "virtualmachines", name, body
        )

    def running_address(self, name: str, *, timeout: float = 60) -> str:
        """Wait until the VMI runs, and return its address."""

        def address() -> str | None:
            vmi = self.get("virtualmachineinstances", name)
            status = (vmi or {}).get("status", {})
            if status.get("phase") != "Running":
                return None
            return str(status["interfaces"][0]["ipAddress"])

        return str(eventually(address, timeout=timeout, what=f"VMI {name} Running"))

    def printable(self, name: str) -> str | None:
        vm = self.get("virtualmachines", name) or {}
        printable = vm.get("status", {}).get("printableStatus")
        return None if printable is None else str(printable)

    def condition(self, name: str, kind: str) -> str | None:
        vm = self.get("virtualmachines", name) or {}
        found = [
            c["status"] for c in vm.get("status", {}).get("conditions", []) if c["type"] == kind
        ]
        return found[0] if found else None


def connect(address: str) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host=address,
        port=5432,
        user="dbi_admin",
        password=PASSWORD,
        dbname="postgres",
        connect_timeout=3,
        autocommit=True,
    )
