"""One backup of an instance at a time, on the real API server and Temporal: a backup
asked for while another runs is answered, naming it, and records nothing; one whose
holder's workflow ended (terminated by hand) does not block the next; the final backup
of a deleted instance takes no lease."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment

from activities.infra import backup_lease
from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.infra.schedules import Schedules
from activities.operations.backup import BeginBackup, FinishBackup
from dbi import connect, names
from dbi.backups import BackupRequest, Begun, Finish, Reason, Trigger
from dbi.config import Config
from devstack.stack import StackInfo
from tests.activities.notes import create_instance

pytestmark = pytest.mark.stack


async def as_workflow(activity: Any, workflow_id: str, *args: Any) -> Any:
    """Run a sync activity as the workflow ``workflow_id`` would, on a thread (its
    Temporal calls go through this event loop)."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, workflow_id=workflow_id)
    return await asyncio.to_thread(env.run, activity, *args)


async def test_a_backup_asked_for_while_another_runs_is_answered_not_taken(
    local_stack: StackInfo,
    temporal_client: Client,
    kube_api: Any,
    namespace: str,
    dbinstance_crd: str,
) -> None:
    uid = create_instance(kube_api, namespace)
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    ctx = Context(
        kube=Kube(connect.kubernetes(local_stack.kubeconfig)),
        config=Config(namespace=namespace),
        schedules=Schedules(temporal_client, asyncio.get_running_loop(), queue),
    )
    request = BackupRequest(namespace=namespace, name="db", trigger=Trigger.MANUAL)
    # A backup whose workflow runs (on a queue nobody polls, it runs until ended).
    first = await temporal_client.start_workflow(
        names.BACKUP_WORKFLOW_TYPE, request, id=f"dbbackup/{namespace}/db-1", task_queue=queue
    )
    begin = BeginBackup(ctx).run
    held: Begun = await as_workflow(begin, first.id, request, "db-1")
    assert held.backup == "db-1"

    second: Begun = await as_workflow(begin, f"dbbackup/{namespace}/db-2", request, "db-2")
    assert second.backup is None and second.reason == Reason.RUNNING
    assert "db-1" in (second.message or "")
    objects = k8s.CustomObjectsApi(kube_api)
    listed: Any = objects.list_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.BACKUP_PLURAL
    )
    assert [b["metadata"]["name"] for b in listed["items"]] == ["db-1"]
    events = k8s.CoreV1Api(kube_api).list_namespaced_event(namespace).items
    assert any(e.reason == Reason.RUNNING and "db-1" in (e.message or "") for e in events)

    final = request.model_copy(update={"trigger": Trigger.DELETE})
    last: Begun = await as_workflow(begin, f"dbbackup/{namespace}/db-final", final, "db-final")
    assert last.backup == "db-final"  # the teardown's final backup waits for no lease

    await first.terminate("ended by hand")
    third: Begun = await as_workflow(begin, f"dbbackup/{namespace}/db-3", request, "db-3")
    assert third.backup == "db-3"  # the lease of a workflow that ended is taken over
    finish = Finish(namespace=namespace, name="db", backup="db-3", uid=uid, reason="Test")
    await as_workflow(FinishBackup(ctx).run, f"dbbackup/{namespace}/db-3", finish)
    leases = k8s.CoordinationV1Api(kube_api).list_namespaced_lease(namespace).items
    assert backup_lease.lease_name(uid) not in {
        (lease.metadata or k8s.V1ObjectMeta()).name for lease in leases
    }
