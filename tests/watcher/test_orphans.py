"""No workflow outlives its instance: a deletion ends the workflow whatever it waits
for, and the resync ends the workflow of an instance whose deletion was missed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus

from dbi import names
from tests.activities.lifecycle import SPEC
from tests.orchestrator import Orchestrator, watching

pytestmark = pytest.mark.stack

MISSING_IMAGE = {**SPEC, "image": "dbi-images/postgres-does-not-exist"}


async def stalled(orchestrator: Orchestrator, namespace: str) -> None:
    orchestrator.apply(namespace, "db", MISSING_IMAGE)
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == ("True", "ImageNotFound"),
        what="Stalled ImageNotFound",
    )


async def test_deleting_a_stalled_instance_completes_its_workflow_at_once(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """A Terminal instance's workflow waits for a new generation; the deletion's wake
    ends that wait and the workflow completes within 10 s of the deletion."""
    async with watching(orchestrator, kube_api, namespace):
        await stalled(orchestrator, namespace)
        handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
        await asyncio.to_thread(orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace)
        assert await asyncio.wait_for(handle.result(), 10) == "the instance no longer exists"


async def test_the_resync_ends_a_workflow_whose_instance_is_gone(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """An instance deleted while no watcher ran leaves its workflow waiting; the next
    watcher's resync finds it with one visibility query and ends it."""
    async with watching(orchestrator, kube_api, namespace):
        await stalled(orchestrator, namespace)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    await asyncio.to_thread(orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace)
    # No watcher saw the deletion, and a Stalled instance's workflow waits for a change
    # (no timer): it runs, orphaned, until a watcher's resync tells it.
    assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
    async with watching(orchestrator, kube_api, namespace):
        assert await asyncio.wait_for(handle.result(), 20) == "the instance no longer exists"
