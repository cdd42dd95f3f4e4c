"""What the backup tests share: the orchestrator's store, `dbi backup` as an operator
runs it, and WAL archived now (rather than at the archiver's next minute)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any, cast

import psycopg
from kubernetes import client as k8s
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from activities.infra import backupstore
from activities.infra.admin_credential import name_for
from dbi import names
from dbi.config import ADMIN_USER, Config
from devstack.stack import StackInfo
from tests.activities.lifecycle import uri
from tests.activities.logins import secret
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


def admin(
    kube_api: Any, orchestrator: Orchestrator, namespace: str, statement: str, name: str = "db"
) -> Any:
    """Run ``statement`` on instance ``name`` as dbi's admin role (what a test may, to
    complete a WAL segment)."""
    params = conninfo_to_dict(uri(kube_api, namespace, name))
    uid = orchestrator.get(namespace, name)["metadata"]["uid"]
    params.update(
        user=ADMIN_USER,
        password=secret(kube_api, Config().namespace, name_for(uid))["password"],
        dbname="postgres",
    )
    with psycopg.connect(make_conninfo("", **params), connect_timeout=3, autocommit=True) as conn:
        cursor = conn.execute(statement.encode())
        return cursor.fetchone() if cursor.description else None


def archived(orchestrator: Orchestrator, namespace: str, where: backupstore.Store) -> list[str]:
    """The names of instance db's files in the WAL archive of ``where``."""
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    return [k.rsplit("/", 1)[1] for k in where.keys(f"{namespace}/db/_wal/{uid}/")]


async def stored(
    orchestrator: Orchestrator, namespace: str, name: str, where: backupstore.Store
) -> bool:
    """Whether WAL file ``name`` is in ``where``; if not, ask the archiver's Schedule for
    a run now (as `temporal schedule trigger` does) rather than wait for its minute.
    Slowly: the Schedule skips a run asked for while one runs."""
    if f"{name}.gz" in archived(orchestrator, namespace, where):
        return True
    schedule = names.wal_archiver_schedule_id(orchestrator.task_queue)
    await orchestrator.client.get_schedule_handle(schedule).trigger()
    await asyncio.sleep(2)
    return False


async def archive_now(
    orchestrator: Orchestrator,
    namespace: str,
    kube_api: Any,
    where: backupstore.Store | None = None,
) -> None:
    """Write a commit to instance db, complete its WAL segment, until the archiver has
    stored it in ``where`` (default: the orchestrator's store). The archiver leases the
    guest's spool at its first visit, then stores at each."""
    where = where or store()
    deadline = time.monotonic() + 200
    while time.monotonic() < deadline:
        await asyncio.to_thread(admin, kube_api, orchestrator, namespace, "SELECT txid_current()")
        (name,) = await asyncio.to_thread(
            admin, kube_api, orchestrator, namespace, "SELECT pg_walfile_name(pg_switch_wal())"
        )
        for _ in range(10):
            if await stored(orchestrator, namespace, name, where):
                return
    raise AssertionError("the archiver stored no WAL within 200 s")
