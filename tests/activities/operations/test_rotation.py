"""A rotation the instance cannot serve is refused or fails for its caller only: the
workflow goes on, and a deletion still tears the instance down (the real stack, the CLI)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s
from psycopg.conninfo import make_conninfo
from temporalio.client import WorkflowExecutionStatus

from dbi import names
from devstack.stack import StackInfo
from tests.activities.lifecycle import SPEC, create, ready
from tests.activities.logins import address, admin_credential, secret
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator
from tests.polling import eventually
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


async def test_rotating_a_stopped_instance_is_refused_and_the_workflow_runs_on(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, local_stack: StackInfo
) -> None:
    """`dbi rotate` on a Stopped instance exits 4 saying why; the workflow keeps running."""
    await create(orchestrator, namespace, {**SPEC, "powerState": "Stopped"})
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    result = await asyncio.to_thread(dbi, local_stack, "rotate", "db", "-n", namespace)
    assert result.returncode == 4, result.stderr
    assert "is stopped; start it to rotate its password" in result.stderr
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


def reject_all(
    local_stack: StackInfo, kube_api: Any, orchestrator: Orchestrator, namespace: str
) -> None:
    """Make the guest's PostgreSQL refuse every connection (pg_hba.conf), as a database
    that is down to dbi."""
    claim = k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim("db-data", namespace)
    assert claim.spec is not None
    hba = Path(local_stack.state_dir) / "vms" / "disks" / str(claim.spec.volume_name)
    hba = hba / "pgdata" / "pg_hba.conf"
    admin = admin_credential(kube_api, orchestrator, namespace)
    host = address(secret(kube_api, namespace, "db-credentials"))
    hba.write_text("host all all 0.0.0.0/0 reject\n" + hba.read_text())
    login = make_conninfo(
        host=host,
        user=admin["username"],
        password=admin["password"],
        dbname="postgres",
        sslmode="require",
    )
    with psycopg.connect(login) as conn:
        conn.execute("SELECT pg_reload_conf()")

    def refused() -> bool:
        """The postmaster reloads on its own time: wait until a new login is refused."""
        try:
            psycopg.connect(login, connect_timeout=5).close()
        except psycopg.OperationalError as e:
            return "rejects connection" in str(e)
        return False

    eventually(refused, timeout=30, what="PostgreSQL refusing logins")


async def test_a_rotation_that_cannot_reach_the_database_fails_for_its_caller_only(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """With PostgreSQL refusing connections, `dbi rotate` exits 4 after bounded attempts;
    the workflow keeps running, and deleting the instance then tears it down."""
    await create(orchestrator, namespace)
    await ready(orchestrator, namespace)
    reject_all(local_stack, kube_api, orchestrator, namespace)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    result = await asyncio.to_thread(dbi, local_stack, "rotate", "db", "-n", namespace)
    assert result.returncode == 4, result.stderr
    assert "the rotation failed after 3 attempts" in result.stderr
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING

    await asyncio.to_thread(
        orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace, "--timeout=60s"
    )
    assert await asyncio.wait_for(handle.result(), 30) == "deleted"
