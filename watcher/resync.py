"""The resync: running workflows matched with the instances that exist, with one
visibility query (not a describe per instance). It starts the workflow of an instance
that has none running (one terminated by hand, say) and tells a running workflow whose
instance is gone that it is (it then completes).

Between full resyncs (``full_at``) a count of the running workflows that equals the
instances ends it there: at 10,000 a list costs the Temporal server seconds. Both go as
wakes in line behind the changes (``Wakeups``, as a relist's): an instance whose wake
already waits (a fleet just applied) is not signaled twice, and a resync that finds
thousands does not send them all at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from temporalio.client import Client

from dbi import names
from watcher.wakeups import RPC_TIMEOUT, Origin, Wakeups

log = logging.getLogger("dbi.watcher")
# How often the resync lists every running workflow even though their count matched
# the instances. A list costs the Temporal server about 0.7 CPU-seconds per 1,000
# workflows (a count 0.01 s at 3,000; docs/benchmarks.md): listed every minute,
# 10,000 instances kept the dev server busy a tenth of a core with nothing to do.
FULL_RESYNC_SECONDS = 600.0


@dataclass
class Resync:
    client: Client
    wakeups: Wakeups
    namespaces: frozenset[str] | None = None  # None: all
    # When the resync next lists every running workflow (loop time; 0: at the next).
    full_at: float = 0.0

    async def run(self, known: set[tuple[str, str]]) -> None:
        """Match the running workflows with ``known``, the instances that exist."""
        now = asyncio.get_running_loop().time()
        if now < self.full_at and await self._count() == len(known):
            return  # as many running as exist: matched one by one at the full resync
        running = await self._running()
        self.full_at = now + FULL_RESYNC_SECONDS
        for key in sorted(known - running):
            log.info("resync: %s/%s has no running workflow; starting it", *key)
            self.wakeups.note(key, "resync: workflow not running", None, origin=Origin.RELIST)
        for key in sorted(running - known):
            log.info("resync: %s/%s no longer exists; ending its workflow", *key)
            self.wakeups.note(key, "resync: instance gone", None, gone=True, origin=Origin.RELIST)

    def _query(self) -> str:
        """The running workflows of this watcher's task queue (and namespaces)."""
        query = (
            f"WorkflowType = '{names.WORKFLOW_TYPE}' AND ExecutionStatus = 'Running'"
            f" AND TaskQueue = '{self.wakeups.task_queue}'"
        )
        if self.namespaces is not None:
            quoted = ", ".join(f"'{n}'" for n in sorted(self.namespaces))
            query += f" AND {names.NAMESPACE_ATTRIBUTE.name} IN ({quoted})"
        return query

    async def _count(self) -> int:
        """How many workflows ``_running`` would list."""
        counted = await self.client.count_workflows(self._query(), rpc_timeout=RPC_TIMEOUT)
        return counted.count

    async def _running(self) -> set[tuple[str, str]]:
        """The instances whose workflow runs on this watcher's task queue (and namespaces)."""
        found = set()
        query = self._query()
        async for execution in self.client.list_workflows(query, rpc_timeout=RPC_TIMEOUT):
            instance = names.instance_of(execution.id)
            if instance is not None:
                found.add(instance)
        return found
