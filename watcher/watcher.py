"""The watcher: Kubernetes changes become wake-ups of each instance's workflow.

It watches DBInstances and the children they own (selected by the ``dbi.dev/instance``
label: Secrets, VirtualMachines, VirtualMachineInstances, PVCs, Services), and hands
every event to ``Wakeups``; a (re)list of DBInstances wakes each one, since events may
have been missed before it. It holds no state of its own but what its watches give it:
the instances that exist, each as last seen (so a child's event after its instance is
gone does not start a workflow, and a status-only change is told from a new spec).
A periodic resync starts the workflow of any instance whose workflow is not running
(one terminated by hand, say).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError

from dbi import names
from dbi.messages import Wake
from watcher import relevance
from watcher.leader import LeaderElection
from watcher.streams import WATCH_SECONDS, Source, forever
from watcher.wakeups import Wakeups

log = logging.getLogger("dbi.watcher")
RESYNC_SECONDS = 60.0


def sources(api: k8s.ApiClient) -> list[Source]:
    """Return the DBInstance source and the children's, selected by the instance label."""
    core, objects = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    child = names.INSTANCE_LABEL
    return [
        Source(
            "DBInstance",
            objects.list_cluster_custom_object,
            (names.GROUP, names.VERSION, names.PLURAL),
        ),
        Source("Secret", core.list_secret_for_all_namespaces, label_selector=child),
        Source(
            "PersistentVolumeClaim",
            core.list_persistent_volume_claim_for_all_namespaces,
            label_selector=child,
        ),
        Source("Service", core.list_service_for_all_namespaces, label_selector=child),
        Source(
            "VirtualMachine",
            objects.list_cluster_custom_object,
            ("kubevirt.io", "v1", "virtualmachines"),
            child,
        ),
        Source(
            "VirtualMachineInstance",
            objects.list_cluster_custom_object,
            ("kubevirt.io", "v1", "virtualmachineinstances"),
            child,
        ),
    ]


@dataclass
class Watcher:
    api: k8s.ApiClient
    client: Client
    wakeups: Wakeups
    namespaces: frozenset[str] | None = None  # None: all
    resync_seconds: float = RESYNC_SECONDS
    watch_seconds: int = WATCH_SECONDS  # how long one watch request lasts before it is resumed
    stop: threading.Event = field(default_factory=threading.Event)
    # The instances that exist, each as last seen (watcher/relevance.py).
    instances: dict[tuple[str, str], relevance.Seen] = field(default_factory=dict)
    # The generation each child was last seen at (watcher/relevance.py).
    children: relevance.Children = field(default_factory=relevance.Children)
    phases: dict[tuple[str, str], str] = field(default_factory=dict)  # for dbi_instances
    election: LeaderElection | None = None

    def handle(self, loop: asyncio.AbstractEventLoop, kind: str, term: threading.Event) -> Any:
        """Return the handler that the watch thread of ``kind`` calls for each event."""

        def on_event(event: str, obj: dict[str, Any]) -> None:
            if term.is_set():
                return  # leadership ended: the next leader relists
            meta = obj.get("metadata", {})
            namespace = meta.get("namespace", "")
            if self.namespaces is not None and namespace not in self.namespaces:
                return
            if kind == "DBInstance":
                name, generation = meta["name"], meta.get("generation")
                key = (namespace, name)
                before = self.instances.get(key)
                if event == "DELETED":
                    self.instances.pop(key, None)
                    self.phases.pop(key, None)
                else:
                    self.instances[key] = relevance.Seen.of(obj)
                    self.phases[key] = (obj.get("status") or {}).get("phase") or "Unknown"
                if not relevance.instance_event_matters(event, obj, before):
                    loop.call_soon_threadsafe(self.wakeups.ignore)
                    return
            else:
                name = (meta.get("labels") or {}).get(names.INSTANCE_LABEL)
                generation = None
                if name is None or (namespace, name) not in self.instances:
                    return
                if event == "SYNC":
                    return  # the instance's own SYNC wakes it
                if not self.children.event_matters(kind, event, obj):
                    loop.call_soon_threadsafe(self.wakeups.ignore)
                    return
            # A (re)list may follow missed events (a restart, 410 Gone): every instance
            # listed is woken, so none is left behind on a change it did not see.
            reason = "relisted" if event == "SYNC" else f"{kind} {meta.get('name')} {event.lower()}"
            loop.call_soon_threadsafe(self.wakeups.note, namespace, name, reason, generation)

        return on_event

    async def run(self) -> None:
        """Watch until ``stop`` is set, while leading; resync every ``resync_seconds``.

        Without an election the watcher always leads. Each term of leadership starts
        its own watches (their first list wakes every instance, so a new leader misses
        nothing its predecessor did not send) and ends them when leadership is lost.
        """
        loop = asyncio.get_running_loop()
        if self.election is not None:
            threading.Thread(target=self.election.run, name="lease", daemon=True).start()
        while not self.stop.is_set():
            if not self._leading():
                await asyncio.sleep(0.2)
                continue
            term = threading.Event()
            try:
                for s in sources(self.api):
                    handler = self.handle(loop, s.kind, term)
                    threading.Thread(
                        target=forever,
                        args=(self.api, s, handler, term, self.watch_seconds),
                        name=f"watch-{s.kind}",
                        daemon=True,
                    ).start()
                next_resync = loop.time() + self.resync_seconds
                while self._leading() and not self.stop.is_set():
                    await asyncio.sleep(0.2)
                    if loop.time() >= next_resync:
                        await self.resync()
                        next_resync = loop.time() + self.resync_seconds
            finally:
                term.set()  # also when cancelled: no watch thread outlives its term
        if self.election is not None:
            self.election.stop.set()
        await self.wakeups.drain()

    def _leading(self) -> bool:
        return self.election is None or self.election.leading.is_set()

    async def resync(self) -> None:
        """Start the workflow of every known instance whose workflow is not running."""
        for namespace, name in sorted(self.instances):
            handle = self.client.get_workflow_handle(names.workflow_id(namespace, name))
            try:
                running = (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
            except RPCError:
                running = False  # never started, or gone from the server
            if not running:
                log.info("resync: %s/%s has no running workflow; starting it", namespace, name)
                await self.wakeups.signal(
                    namespace, name, Wake(reason="resync: workflow not running")
                )
