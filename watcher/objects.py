"""Wake-ups of the DBDatabases' workflows (``workflows.objects``).

Each DBDatabase event that changes what its workflow converges (a new object, a new
generation, a deletion begun, a relist) starts or wakes its workflow; a status-only
change does not (the workflow wrote it). An instance event that can change what its
DBDatabases find (the instance created, deleted, relisted, or its Ready changed) wakes
each DBDatabase that names it. A wake that fails is tried again a few times; the
workflow's own re-check (``workflows.objects.RECHECK``) covers one that never arrives.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from dbi import databases, names
from dbi.databases import ObjectRef
from watcher.wakeups import RPC_TIMEOUT, why

log = logging.getLogger("dbi.watcher")
ATTEMPTS = 5


@dataclass(frozen=True)
class _Seen:
    instance: str
    uid: str
    generation: int | None
    deleting: bool


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class ObjectWakes:
    client: Client
    task_queue: str = names.TASK_QUEUE
    # Each DBDatabase as last seen, and each instance's Ready as last seen.
    databases: dict[tuple[str, str], _Seen] = field(default_factory=dict)
    ready: dict[tuple[str, str], bool] = field(default_factory=dict)
    sent: int = 0

    def database_event(self, event: str, obj: dict[str, Any]) -> list[tuple[str, str]]:
        """Remember a DBDatabase event; return the objects to wake (this one, or none)."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        before = self.databases.get(key)
        now = _Seen(
            instance=str((obj.get("spec") or {}).get("instance", "")),
            uid=str(meta.get("uid", "")),
            generation=meta.get("generation"),
            deleting=bool(meta.get("deletionTimestamp")),
        )
        if event == "DELETED":
            self.databases.pop(key, None)
            return []
        self.databases[key] = now
        return [key] if event == "SYNC" or before != now else []

    def instance_event(self, event: str, obj: dict[str, Any]) -> list[tuple[str, str]]:
        """Remember an instance's Ready; return the DBDatabases on it to wake."""
        meta = obj["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        before = self.ready.get((namespace, name))
        if event == "DELETED":
            self.ready.pop((namespace, name), None)
        else:
            self.ready[(namespace, name)] = _ready(obj)
        if event not in ("ADDED", "DELETED", "SYNC") and before == self.ready.get(
            (namespace, name)
        ):
            return []
        return [k for k, s in self.databases.items() if k[0] == namespace and s.instance == name]

    def soon(self, loop: asyncio.AbstractEventLoop, keys: list[tuple[str, str]]) -> None:
        """Wake ``keys`` from a watch thread, on the watcher's event loop."""
        for key in keys:
            asyncio.run_coroutine_threadsafe(self.wake(key), loop)

    async def wake(self, key: tuple[str, str]) -> None:
        """Start the DBDatabase's workflow, or wake it when it runs."""
        seen = self.databases.get(key)
        if seen is None:
            return
        ref = ObjectRef(namespace=key[0], name=key[1], uid=seen.uid)
        for attempt in range(ATTEMPTS):
            try:
                await self.client.start_workflow(
                    names.DATABASE_WORKFLOW_TYPE,
                    ref,
                    id=databases.workflow_id(*key),
                    task_queue=self.task_queue,
                    start_signal=names.WAKE,
                    rpc_timeout=RPC_TIMEOUT,
                )
                self.sent += 1
                return
            except Exception as e:
                log.warning("wake of DBDatabase %s/%s failed (%s)", *key, why(e))
                await asyncio.sleep(2.0**attempt)
