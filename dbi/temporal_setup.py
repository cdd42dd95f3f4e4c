"""The Temporal side of an install: dbi's search attributes, and its task queue.

``dbi temporal setup`` runs ``setup``: it registers the search attributes dbi's
workflows carry (``names.SEARCH_ATTRIBUTES``) on the Temporal namespace, leaving those
already there, and says whether a worker polls dbi's task queue. It is idempotent;
deploy/ runs it as a Job. The worker and the watcher call ``require`` when they start
and refuse to run without the attributes (every workflow start would fail).

Registration goes through Temporal's operator service, as ``temporal operator
search-attribute create`` does; on Temporal Cloud, where that service does not add
them, create them in the namespace's settings and the check still applies.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TypeAlias

from temporalio.api.enums.v1 import IndexedValueType, TaskQueueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from dbi import names

TIMEOUT = timedelta(seconds=10)


class SetupNeeded(ValueError):
    """The Temporal namespace lacks what dbi needs; the message says what to run."""


Indexed: TypeAlias = IndexedValueType.ValueType


def _indexed(kind: names.SearchAttributeType) -> Indexed:
    return IndexedValueType.Value(f"INDEXED_VALUE_TYPE_{kind.value.upper()}")


def _kind_name(value: Indexed) -> str:
    return str(IndexedValueType.Name(value)).removeprefix("INDEXED_VALUE_TYPE_").capitalize()


async def registered(client: Client) -> dict[str, Indexed]:
    """The namespace's custom search attributes, by name, with their indexed type."""
    response = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace), timeout=TIMEOUT
    )
    return dict(response.custom_attributes)


def compare(existing: dict[str, Indexed]) -> tuple[list[str], list[str]]:
    """The attributes dbi needs that are missing, and those registered with another
    type, each as people read it (plain data)."""
    missing, wrong = [], []
    for key, kind in names.SEARCH_ATTRIBUTES.items():
        if key not in existing:
            missing.append(f"{key} ({kind.value})")
        elif existing[key] != _indexed(kind):
            wrong.append(f"{key} is {_kind_name(existing[key])}, dbi needs {kind.value}")
    return missing, wrong


async def require(client: Client) -> None:
    """Raise SetupNeeded, saying what is missing and what to run, unless the namespace
    has every search attribute dbi needs, each of its type."""
    missing, wrong = compare(await registered(client))
    if wrong:
        raise SetupNeeded(
            f"the Temporal namespace {client.namespace!r} has search attributes of another "
            f"type: {'; '.join(wrong)}. Use another namespace, or remove them."
        )
    if missing:
        raise SetupNeeded(
            f"the Temporal namespace {client.namespace!r} lacks dbi's search attributes "
            f"{', '.join(missing)}: run `dbi temporal setup` (deploy/ runs it as the Job "
            "dbi-temporal-setup)"
        )


async def setup(client: Client, task_queue: str, say: Callable[[str], None]) -> bool:
    """Register the missing search attributes and report the task queue's pollers;
    return False when the namespace holds one of them with another type."""
    say(f"Temporal namespace {client.namespace!r}:")
    existing = await registered(client)
    _, wrong = compare(existing)
    adding = {}
    for key, kind in names.SEARCH_ATTRIBUTES.items():
        if key not in existing:
            adding[key] = _indexed(kind)
            say(f"  search attribute {key} ({kind.value}): adding")
        elif existing[key] == _indexed(kind):
            say(f"  search attribute {key} ({kind.value}): already registered")
    for line in wrong:
        say(f"  conflict: {line}; use another namespace, or remove it")
    if adding:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=adding),
            timeout=TIMEOUT,
        )
        say(f"  added {len(adding)} search attribute(s)")
    pollers = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=TIMEOUT,
    )
    count = len(pollers.pollers)
    if count:
        say(f"task queue {task_queue!r}: {count} worker(s) polling")
    else:
        say(f"task queue {task_queue!r}: no worker polls it yet (start `dbi worker`)")
    return not wrong
