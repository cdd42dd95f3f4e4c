"""A DBInstance converges on the real stack: every step, real Kubernetes, real PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from tests.appclient import conninfo
from tests.orchestrator import Orchestrator

pytestmark = pytest.mark.stack

SPEC = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "healthCheckInterval": "10s",
}


def secret_data(kube_api: Any, namespace: str, name: str) -> dict[str, str]:
    secret = k8s.CoreV1Api(kube_api).read_namespaced_secret(name, namespace)
    return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}


async def test_an_instance_becomes_ready_with_every_condition_true(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """Ready=True, each step's condition True, an endpoint, and the generation observed."""
    orchestrator.apply(namespace, "orders", SPEC)
    await orchestrator.start(namespace, "orders")
    await asyncio.to_thread(orchestrator.wait_ready, namespace, "orders")
    db = orchestrator.get(namespace, "orders")
    conditions = {c["type"]: c["status"] for c in db["status"]["conditions"]}
    for kind in (
        "SpecValid",
        "CredentialsReady",
        "VMProvisioned",
        "PowerSynced",
        "SizeSynced",
        "DatabaseHealthy",
        "AccessReady",
        "MonitoringReady",
        "Ready",
    ):
        assert conditions[kind] == "True", (kind, db["status"]["conditions"])
    assert db["status"]["observedGeneration"] == db["metadata"]["generation"]
    assert db["status"]["endpoint"]["port"] == 5432
    assert db["status"]["phase"] == "Running"

    creds = secret_data(kube_api, namespace, db["status"]["credentialsSecretName"])
    with psycopg.connect(conninfo(creds), connect_timeout=3, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id int)")
        conn.execute("INSERT INTO orders VALUES (1)")
        assert conn.execute("SELECT current_user, current_database()").fetchone() == ("app", "app")
