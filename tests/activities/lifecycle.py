"""An instance on the real stack: create it, wait until Ready, read its objects,
its Events and its database."""

from __future__ import annotations

import base64
from typing import Any, cast

import psycopg
from kubernetes import client as k8s

from tests.appclient import conninfo
from tests.orchestrator import Orchestrator

SPEC: dict[str, Any] = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "healthCheckInterval": "30s",
}


KUBEVIRT = ("kubevirt.io", "v1")


def uri(kube_api: Any, namespace: str, name: str) -> str:
    """The credentials Secret's uri, with its ca.crt as an app's root certificate."""
    secret = k8s.CoreV1Api(kube_api).read_namespaced_secret(f"{name}-credentials", namespace)
    data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
    return conninfo(data)


def sql(kube_api: Any, namespace: str, statement: str) -> Any:
    """Run one of this module's fixed statements as the app user of instance ``db``."""
    with psycopg.connect(
        uri(kube_api, namespace, "db"), connect_timeout=3, autocommit=True
    ) as conn:
        cursor = conn.execute(statement.encode())
        return cursor.fetchone() if cursor.description else None


async def ready(orchestrator: Orchestrator, namespace: str, name: str = "db") -> dict[str, Any]:
    """Wait until Ready is True for the current generation; return the object."""

    def check() -> dict[str, Any] | None:
        # One read for both: a second read could see Ready while the object returned
        # is the older one (an earlier pass's status, without what Ready brings).
        db = orchestrator.get(namespace, name)
        status = db.get("status", {})
        fresh = status.get("observedGeneration") == db["metadata"]["generation"]
        ready = [
            (c["status"], c["reason"]) for c in status.get("conditions", []) if c["type"] == "Ready"
        ]
        return db if fresh and ready == [("True", "Converged")] else None

    try:
        found: dict[str, Any] = await orchestrator.until(
            check, what="Ready for the current generation"
        )
    except AssertionError as e:
        conditions = orchestrator.get(namespace, name).get("status", {}).get("conditions", [])
        held = [f"{c['type']}={c['status']} {c['reason']}: {c['message']}" for c in conditions]
        raise AssertionError(f"{e}; conditions: {held}") from None
    return found


async def create(
    orchestrator: Orchestrator, namespace: str, spec: dict[str, Any] = SPEC
) -> dict[str, Any]:
    orchestrator.apply(namespace, "db", spec)
    return await ready(orchestrator, namespace)


def custom(kube_api: Any, namespace: str, plural: str, name: str) -> dict[str, Any]:
    """Return a KubeVirt object, or {} when it does not exist."""
    try:
        found = k8s.CustomObjectsApi(kube_api).get_namespaced_custom_object(
            *KUBEVIRT, namespace, plural, name
        )
    except k8s.ApiException as e:
        if e.status == 404:
            return {}
        raise
    return cast(dict[str, Any], found)


def vmi_uid(kube_api: Any, namespace: str) -> str | None:
    uid = (
        custom(kube_api, namespace, "virtualmachineinstances", "db").get("metadata", {}).get("uid")
    )
    return None if uid is None else str(uid)


def events_of(kube_api: Any, namespace: str) -> list[tuple[str, str]]:
    items = k8s.CoreV1Api(kube_api).list_namespaced_event(namespace).items
    return sorted(
        (e.reason or "", e.message or "") for e in items if e.involved_object.name == "db"
    )
