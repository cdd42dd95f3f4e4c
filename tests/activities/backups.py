"""What the backup tests share: the orchestrator's store, and `dbi backup` as an
operator runs it."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from kubernetes import client as k8s

from activities.infra import backupstore
from dbi import names
from dbi.config import Config
from devstack.stack import StackInfo
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator


def dbbackups(kube_api: Any, namespace: str) -> list[dict[str, Any]]:
    """The namespace's DBBackups, by name."""
    found = k8s.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.BACKUP_PLURAL
    )
    return sorted(cast(dict[str, Any], found)["items"], key=lambda i: i["metadata"]["name"])


def store() -> backupstore.Store:
    return backupstore.open_store(Config.from_env())


async def backed_up(
    orchestrator: Orchestrator, local_stack: StackInfo, namespace: str
) -> dict[str, Any]:
    """Run `dbi backup db -o json` as an operator would; return its answer."""
    took = await asyncio.to_thread(
        dbi,
        local_stack,
        "backup",
        "db",
        "-n",
        namespace,
        "-o",
        "json",
        DBI_TASK_QUEUE=orchestrator.task_queue,
    )
    assert took.returncode == 0, took.stderr
    return cast(dict[str, Any], json.loads(took.stdout))
