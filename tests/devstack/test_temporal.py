"""The Temporal dev server runs workflows and knows dbi's search attributes
(docs/architecture.md, "Names")."""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import activity, workflow
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes
from temporalio.worker import Worker

from dbi import names
from devstack.stack import StackInfo
from devstack.temporal import NAMESPACE

pytestmark = pytest.mark.stack


@activity.defn
async def greet(name: str) -> str:
    return f"hello, {name}"


@workflow.defn(sandboxed=False)
class GreetingWorkflow:
    @workflow.run
    async def run(self, name: str) -> str:
        return await workflow.execute_activity(
            greet, name, start_to_close_timeout=timedelta(seconds=10)
        )


async def test_a_workflow_runs_on_the_dev_server(temporal_client: Client) -> None:
    """A workflow and its activity, hosted by an in-process worker, complete with a result."""
    queue = f"test-{uuid.uuid4()}"
    async with Worker(
        temporal_client, task_queue=queue, workflows=[GreetingWorkflow], activities=[greet]
    ):
        result = await temporal_client.execute_workflow(
            GreetingWorkflow.run, "dbi", id=f"greet-{uuid.uuid4()}", task_queue=queue
        )
    assert result == "hello, dbi"


async def test_search_attributes_are_registered(temporal_client: Client) -> None:
    """Every search attribute dbi names exists on the namespace with its type."""
    response = await temporal_client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=NAMESPACE)
    )
    registered = {
        key: IndexedValueType.Name(value) for key, value in response.custom_attributes.items()
    }
    for key, kind in names.SEARCH_ATTRIBUTES.items():
        assert registered.get(key) == f"INDEXED_VALUE_TYPE_{kind.upper()}", key


async def test_a_workflow_is_found_by_its_search_attributes(temporal_client: Client) -> None:
    """A workflow started with DbiNamespace and DbiName is listed by a query on them."""
    name = f"sa-{uuid.uuid4().hex[:8]}"
    attributes = TypedSearchAttributes(
        [
            SearchAttributePair(SearchAttributeKey.for_keyword("DbiNamespace"), "team-a"),
            SearchAttributePair(SearchAttributeKey.for_keyword("DbiName"), name),
            SearchAttributePair(SearchAttributeKey.for_bool("DbiReady"), False),
        ]
    )
    queue = f"test-{uuid.uuid4()}"
    async with Worker(
        temporal_client, task_queue=queue, workflows=[GreetingWorkflow], activities=[greet]
    ):
        await temporal_client.execute_workflow(
            GreetingWorkflow.run,
            name,
            id=names.workflow_id("team-a", name),
            task_queue=queue,
            search_attributes=attributes,
        )
    query = f"DbiNamespace = 'team-a' AND DbiName = '{name}' AND DbiReady = false"
    for _ in range(100):  # visibility is eventually consistent; allow it 10 seconds
        found = [w.id async for w in temporal_client.list_workflows(query)]
        if found:
            break
        await asyncio.sleep(0.1)
    assert found == [names.workflow_id("team-a", name)]


async def test_its_database_keeps_a_write_ahead_log(
    local_stack: StackInfo, temporal_client: Client
) -> None:
    """Temporal's SQLite file is journaled by a write-ahead log (devstack.temporal's
    pragmas), which holds the commits of a workflow just run: as durable as the
    rollback journal, with a quarter of its fsyncs (docs/benchmarks.md)."""
    await test_a_workflow_runs_on_the_dev_server(temporal_client)
    database = Path(local_stack.state_dir) / "temporal.sqlite"
    reader = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        (mode,) = reader.execute("PRAGMA journal_mode").fetchone()
    finally:
        reader.close()
    assert mode == "wal"
    assert Path(f"{database}-wal").stat().st_size > 0
