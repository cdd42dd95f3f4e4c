"""Wake-ups of the DBDatabases' and DBRoles' workflows (``workflows.objects``).

Each event of such an object that changes what its workflow converges (a new object,
a new generation, a deletion begun, a new ``dbi.dev/rotate-requested-at``, a relist)
starts or wakes its workflow; a status-only change does not (the workflow wrote it).
A DBRole's credentials Secret deleted wakes the DBRole (it writes a new password).
An instance event that can change what its objects find (the instance created,
deleted, relisted, or its Ready changed) wakes each object that names it. A wake that
fails is tried again a few times; the workflow's own re-check
(``workflows.objects.RECHECK``) covers one that never arrives.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from temporalio.client import Client

from dbi import names
from dbi.objects import KINDS, ObjectRef
from watcher.wakeups import RPC_TIMEOUT, why

log = logging.getLogger("dbi.watcher")
ATTEMPTS = 5
WORKFLOW_TYPES = {
    names.DATABASE_KIND: names.DATABASE_WORKFLOW_TYPE,
    names.ROLE_KIND: names.ROLE_WORKFLOW_TYPE,
}


# An object: (kind, namespace, name).
Key = tuple[str, str, str]


@dataclass(frozen=True)
class _Seen:
    instance: str
    uid: str
    generation: int | None
    deleting: bool
    rotation: str | None


def _ready(obj: dict[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class ObjectWakes:
    client: Client
    task_queue: str = names.TASK_QUEUE
    # Each object as last seen, and each instance's Ready as last seen.
    seen: dict[Key, _Seen] = field(default_factory=dict)
    ready: dict[tuple[str, str], bool] = field(default_factory=dict)
    sent: int = 0

    def object_event(self, kind: str, event: str, obj: dict[str, Any]) -> list[Key]:
        """Remember an object's event; return the objects to wake (this one, or none)."""
        meta = obj["metadata"]
        key = (kind, meta.get("namespace", ""), meta["name"])
        before = self.seen.get(key)
        now = _Seen(
            instance=str((obj.get("spec") or {}).get("instance", "")),
            uid=str(meta.get("uid", "")),
            generation=meta.get("generation"),
            deleting=bool(meta.get("deletionTimestamp")),
            rotation=(meta.get("annotations") or {}).get(names.ROTATE_REQUESTED_AT),
        )
        if event == "DELETED":
            self.seen.pop(key, None)
            return []
        self.seen[key] = now
        return [key] if event == "SYNC" or before != now else []

    def instance_event(self, event: str, obj: dict[str, Any]) -> list[Key]:
        """Remember an instance's Ready; return the objects on it to wake."""
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
        return [k for k, s in self.seen.items() if k[1] == namespace and s.instance == name]

    def child_event(self, kind: str, event: str, obj: dict[str, Any]) -> list[Key]:
        """A DBRole's credentials Secret deleted wakes the DBRole (a new password)."""
        meta = obj.get("metadata") or {}
        owner = (meta.get("labels") or {}).get(names.ROLE_LABEL)
        key = (names.ROLE_KIND, meta.get("namespace", ""), owner or "")
        return [key] if kind == "Secret" and event == "DELETED" and key in self.seen else []

    def soon(self, loop: asyncio.AbstractEventLoop, keys: list[Key]) -> None:
        """Wake ``keys`` from a watch thread, on the watcher's event loop."""
        for key in keys:
            asyncio.run_coroutine_threadsafe(self.wake(key), loop)

    async def wake(self, key: Key) -> None:
        """Start the object's workflow, or wake it when it runs."""
        seen = self.seen.get(key)
        if seen is None:
            return
        kind, namespace, name = key
        ref = ObjectRef(kind=kind, namespace=namespace, name=name, uid=seen.uid)
        for attempt in range(ATTEMPTS):
            try:
                await self.client.start_workflow(
                    WORKFLOW_TYPES[kind],
                    ref,
                    id=KINDS[kind].workflow_id(namespace, name),
                    task_queue=self.task_queue,
                    start_signal=names.WAKE,
                    rpc_timeout=RPC_TIMEOUT,
                )
                self.sent += 1
                return
            except Exception as e:
                log.warning("wake of %s %s/%s failed (%s)", *key, why(e))
                await asyncio.sleep(2.0**attempt)
