"""What the backup tests share: the orchestrator's store, and `dbi backup` as an
operator runs it."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

from activities.infra import backupstore
from dbi.config import Config
from devstack.stack import StackInfo
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator


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
