"""An instance's credentials Secret and logins with it (the app's and dbi's admin)."""

from __future__ import annotations

import base64
from typing import Any

import psycopg
from kubernetes import client as k8s

from activities.infra.admin_credential import name_for
from dbi.config import Config
from tests.activities.lifecycle import ready
from tests.orchestrator import Orchestrator


def secret(kube_api: Any, namespace: str, name: str) -> dict[str, str]:
    found = k8s.CoreV1Api(kube_api).read_namespaced_secret(name, namespace)
    return {k: base64.b64decode(v).decode(errors="replace") for k, v in (found.data or {}).items()}


def address(data: dict[str, str]) -> str:
    """Where a client on this host connects, from the credentials Secret: the Service's
    ClusterIP (``hostaddr``: the host has no cluster DNS for ``host``)."""
    return data.get("hostaddr") or data["host"]


def admin_credential(kube_api: Any, orchestrator: Orchestrator, namespace: str) -> dict[str, str]:
    """The admin credential of instance ``db``, from the orchestrator's namespace."""
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    return secret(kube_api, Config().namespace, name_for(uid))


def logs_in(host: str, user: str, password: str, dbname: str) -> bool:
    try:
        with psycopg.connect(
            host=host,
            port=5432,
            user=user,
            password=password,
            dbname=dbname,
            connect_timeout=3,
            sslmode="require",  # the password is what is checked here, not the server
        ):
            return True
    except psycopg.OperationalError:
        return False


def app_works(kube_api: Any, namespace: str, password: str) -> bool:
    data = secret(kube_api, namespace, "db-credentials")
    return logs_in(address(data), "app", password, "app")


async def settled(orchestrator: Orchestrator, namespace: str, kube_api: Any) -> dict[str, str]:
    """Wait until Ready and the Secret's password works; return the Secret's data."""
    await ready(orchestrator, namespace)

    def working() -> dict[str, str] | None:
        try:
            data = secret(kube_api, namespace, "db-credentials")
        except k8s.ApiException as e:
            if e.status == 404:  # deleted, and not made again yet
                return None
            raise
        return data if "host" in data and app_works(kube_api, namespace, data["password"]) else None

    found: dict[str, str] = await orchestrator.until(working, what="a working app password")
    return found
