"""dbi's admin credential of an instance, as the worker keeps it in its home namespace."""

from __future__ import annotations

from typing import Any

from activities.infra.admin_credential import name_for
from dbi.config import Config
from tests.activities.logins import secret
from tests.orchestrator import Orchestrator

HOME = Config().namespace


def uid_of(orchestrator: Orchestrator, namespace: str) -> str:
    return str(orchestrator.get(namespace, "db")["metadata"]["uid"])


def credential(kube_api: Any, uid: str) -> dict[str, str]:
    return secret(kube_api, HOME, name_for(uid))
