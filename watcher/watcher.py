"""The watcher: Kubernetes changes become wake-ups of each instance's workflow.

It watches DBInstances and the children they own (selected by the ``dbi.dev/instance``
label: Secrets as metadata only, VirtualMachines, VirtualMachineInstances, PVCs,
Services), cluster-wide or namespace by namespace, and hands every event to
``Wakeups`` (DBBackups only feed the backup metrics, ``dbi.metrics.Backups``;
DBDatabases wake their own workflows, ``watcher.objects``); a
(re)list of DBInstances wakes each one, since events may have been missed before it.
It holds no state of its own but what its watches give it: the instances that exist,
each as last seen (so a child's event after its instance is gone does not start a
workflow, and a status-only change is told from a new spec).
A deletion tells the instance's workflow it is gone (a wake that ends every wait,
a Terminal one too). A periodic resync (``watcher.resync``) matches running workflows
with instances: it starts the workflow of an instance that has none running (one
terminated by hand, say) and tells a workflow whose instance is gone.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from pydantic import ValidationError
from temporalio.client import Client

from dbi import kinds, metrics, names, stored
from dbi.messages import SeenInstance
from dbi.streams import WATCH_SECONDS, Listener, Source, WatchState, forever
from watcher import relevance
from watcher.leader import LeaderElection
from watcher.objects import ObjectWakes
from watcher.resync import Resync
from watcher.wakeups import Origin, Wakeups, why

log = logging.getLogger("dbi.watcher")
RESYNC_SECONDS = 60.0
# How long one resync may take at most (each visibility page has RPC_TIMEOUT): it runs
# beside the loop that checks leadership. While 10,000 instances converged on a loaded
# dev server, every resync bounded to 30 s failed.
RESYNC_TIMEOUT_SECONDS = 300.0
# How long a stopping watcher waits for its Lease to be given up.
RELEASE_SECONDS = 10.0
# How long a watch may be down before the watcher reports itself not ready.
WATCH_GRACE_SECONDS = 20.0


def sources(api: k8s.ApiClient, namespaces: frozenset[str] | None = None) -> list[Source]:
    """Return the watched kinds' sources (``dbi.kinds.WATCHED``): the DBInstances and
    their children, selected by the instance label; cluster-wide lists and watches, or,
    given ``namespaces``, one of each per namespace (what RoleBindings in those
    namespaces allow). Secrets come as metadata only."""
    if namespaces is None:
        return [kinds.source(api, k, metadata=k.metadata) for k in kinds.WATCHED]
    return [
        kinds.source(api, k, ns, metadata=k.metadata)
        for ns in sorted(namespaces)
        for k in kinds.WATCHED
    ]


def origin(kind: str, event: str) -> Origin:
    """Whose event it is: a relist's, a DBInstance's change, or a child's."""
    if event == "SYNC":
        return Origin.RELIST
    return Origin.CHANGE if kind == "DBInstance" else Origin.CHILD


def _seen(obj: dict[str, Any]) -> SeenInstance | None:
    """The instance as its pass's load would find it (``dbi.stored.seen``); None when this
    watcher cannot tell (the wake goes out without it, and the pass loads first)."""
    try:
        return SeenInstance.of(stored.seen(obj))
    except (ValidationError, KeyError, TypeError, ValueError):
        return None


@dataclass(frozen=True)
class _Wake:
    """Whom an event wakes (an instance's name), with what, and whether it is worth it."""

    name: str
    generation: int | None
    gone: bool
    matters: bool
    retry: bool = False
    seen: SeenInstance | None = None  # the instance, when new or of a new generation


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
    # Each instance's status phase and Ready, for dbi_instances and dbi_instance_ready.
    statuses: dict[tuple[str, str], metrics.Shown] = field(default_factory=dict)
    # The DBBackups, for the per-instance backup families (they wake no workflow).
    backups: metrics.Backups = field(default_factory=metrics.Backups)
    election: LeaderElection | None = None
    # Set once the DBInstances were listed whole in this term (the resync waits for it).
    listed: threading.Event = field(default_factory=threading.Event)
    # The DBInstances each current (re)list has reported so far, by the namespace it
    # lists (None: all), and the namespaces not yet listed whole in this term.
    listing: dict[str | None, set[tuple[str, str]]] = field(default_factory=dict)
    unlisted: set[str | None] = field(default_factory=set)
    # Each watch of the current term, live or failing (readiness reads them).
    watches: dict[str, WatchState] = field(default_factory=dict)
    resyncs: Resync = field(init=False)
    objects: ObjectWakes = field(init=False)  # the DBDatabases' wakes

    def __post_init__(self) -> None:
        self.resyncs = Resync(self.client, self.wakeups, self.namespaces)
        self.objects = ObjectWakes(self.client, self.wakeups.task_queue)

    def handle(
        self,
        loop: asyncio.AbstractEventLoop,
        kind: str,
        term: threading.Event,
        scope: str | None = None,
    ) -> Any:
        """Return the handler that the watch thread of ``kind`` in namespace ``scope``
        (None: all) calls for each event."""

        def on_event(event: str, obj: dict[str, Any]) -> None:
            if term.is_set():
                return  # leadership ended: the next leader relists
            meta = obj.get("metadata", {})
            namespace = meta.get("namespace", "")  # a watched one: sources() lists no other
            wake: _Wake | None
            if kind == kinds.DBBACKUPS.name:
                self.backups.note(event, obj)
                return
            if kind in kinds.DECLARED:
                return self.objects.soon(loop, self.objects.object_event(kind, event, obj))
            if kind == "DBInstance":
                if event == "SYNC":
                    self.listing.setdefault(scope, set()).add((namespace, meta["name"]))
                wake = self._instance_event(event, obj)
                self.objects.soon(loop, self.objects.instance_event(event, obj))
            else:
                wake = self._child_event(kind, event, obj)
                self.objects.soon(loop, self.objects.child_event(kind, event, obj))
            if wake is None:
                return
            if not wake.matters:
                loop.call_soon_threadsafe(self.wakeups.ignore)
                return
            # A (re)list may follow missed events (a restart, 410 Gone): every instance
            # listed is woken, so none is left behind on a change it did not see.
            reason = "relisted" if event == "SYNC" else f"{kind} {meta.get('name')} {event.lower()}"
            loop.call_soon_threadsafe(
                functools.partial(
                    self.wakeups.note,
                    (namespace, wake.name),
                    reason,
                    wake.generation,
                    gone=wake.gone,
                    retry=wake.retry,
                    origin=origin(kind, event),
                    seen=wake.seen,
                )
            )

        return on_event

    def _instance_event(self, event: str, obj: dict[str, Any]) -> _Wake:
        """Remember what a DBInstance event says of it; return whom it wakes and how."""
        meta = obj["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        before = self.instances.get(key)
        now = relevance.Seen.of(obj)
        if event == "DELETED":
            self.instances.pop(key, None)
            self.statuses.pop(key, None)
        else:
            self.instances[key] = now
            self.statuses[key] = metrics.Shown.of_instance(obj, datetime.now(UTC))
        matters = relevance.instance_event_matters(event, obj, before)
        announced = event in {"ADDED", "MODIFIED"} and relevance.new_generation(now, before)
        return _Wake(
            name=key[1],
            generation=meta.get("generation"),
            gone=event == "DELETED",
            matters=matters,
            retry=relevance.decided(now, before),
            seen=_seen(obj) if matters and announced else None,
        )

    def _child_event(self, kind: str, event: str, obj: dict[str, Any]) -> _Wake | None:
        """Return whom a child's event wakes; None when it concerns no known instance
        (or is a list's: the instance's own SYNC wakes it)."""
        meta = obj.get("metadata", {})
        name = (meta.get("labels") or {}).get(names.INSTANCE_LABEL)
        if name is None or (meta.get("namespace", ""), name) not in self.instances:
            return None
        if event == "SYNC":
            return None
        return _Wake(
            name=name,
            generation=None,
            gone=False,
            matters=self.children.event_matters(kind, event, obj),
        )

    def listed_whole(
        self, loop: asyncio.AbstractEventLoop, term: threading.Event, scope: str | None = None
    ) -> Any:
        """Return what the DBInstance watch of namespace ``scope`` (None: all) calls once
        a (re)list is whole: forget the instances of its scope it no longer reports
        (deleted while no watch ran), tell their workflows they are gone, and, once every
        scope was listed in this term, let the resync run."""

        def on_listed() -> None:
            if term.is_set():
                return
            listed = self.listing.pop(scope, set())
            self._forget_unlisted(loop, scope, listed)
            self.unlisted.discard(scope)
            if not self.unlisted:
                self.listed.set()

        return on_listed

    def _forget_unlisted(
        self,
        loop: asyncio.AbstractEventLoop,
        scope: str | None,
        listed: set[tuple[str, str]],
    ) -> None:
        known = {key for key in self.instances if scope is None or key[0] == scope}
        for key in known - listed:
            self.instances.pop(key, None)
            self.statuses.pop(key, None)
            loop.call_soon_threadsafe(
                functools.partial(
                    self.wakeups.note, key, "DBInstance not relisted", None, gone=True
                )
            )

    async def run(self) -> None:
        """Watch until ``stop`` is set, while leading; resync every ``resync_seconds``.

        Without an election the watcher always leads. Each term of leadership starts
        its own watches (their first list wakes every instance, so a new leader misses
        nothing its predecessor did not send) and ends them when leadership is lost.
        Once stopped, it gives its Lease up before it returns (also when cancelled),
        so another replica takes over at once rather than after the Lease expires.
        """
        loop = asyncio.get_running_loop()
        lease = None
        if self.election is not None:
            lease = threading.Thread(target=self.election.run, name="lease", daemon=True)
            lease.start()
        try:
            await self._lead_while_elected(loop)
        finally:
            if self.election is not None and lease is not None:
                self.election.stop.set()
                await asyncio.shield(asyncio.to_thread(lease.join, RELEASE_SECONDS))
        await self.wakeups.drain()

    async def _lead_while_elected(self, loop: asyncio.AbstractEventLoop) -> None:
        while not self.stop.is_set():
            if not self._leading():
                await asyncio.sleep(0.2)
                continue
            term = threading.Event()
            self.listed.clear()
            self.listing = {}
            self.resyncs.full_at = 0.0
            resyncing: asyncio.Task[None] | None = None
            try:
                self._start_watches(loop, term)
                next_resync = loop.time() + self.resync_seconds
                while self._leading() and not self.stop.is_set():
                    await asyncio.sleep(0.2)
                    if resyncing is not None and resyncing.done():
                        resyncing, next_resync = None, loop.time() + self.resync_seconds
                    if resyncing is None and loop.time() >= next_resync:
                        resyncing = loop.create_task(self._bounded_resync())
            finally:
                term.set()  # also when cancelled: no watch thread outlives its term
                self.watches = {}
                self.statuses.clear()  # the next leader serves dbi_instances*
                self.backups.seen.clear()
                if resyncing is not None:
                    resyncing.cancel()  # the term's resync ends with it

    def _start_watches(self, loop: asyncio.AbstractEventLoop, term: threading.Event) -> None:
        """Start one thread per source for this term; each ends when ``term`` is set."""
        watches: dict[str, WatchState] = {}
        watched = sources(self.api, self.namespaces)
        self.unlisted = {s.namespace for s in watched if s.kind == "DBInstance"}
        for s in watched:
            listener = Listener(
                self.handle(loop, s.kind, term, s.namespace),
                self.listed_whole(loop, term, s.namespace) if s.kind == "DBInstance" else None,
            )
            watches[s.name] = listener.state
            threading.Thread(
                target=forever,
                args=(self.api, s, listener, term, self.watch_seconds),
                name=f"watch-{s.name}",
                daemon=True,
            ).start()
        self.watches = watches

    async def _bounded_resync(self) -> None:
        """Resync, but never for longer than RESYNC_TIMEOUT_SECONDS; one at a time, the
        next ``resync_seconds`` after this one ends."""
        try:
            await asyncio.wait_for(self.resync(), RESYNC_TIMEOUT_SECONDS)
        except Exception as e:  # Temporal unreachable: the next resync tries again
            log.warning("resync failed (%s); trying again in %.0fs", why(e), self.resync_seconds)

    def problem(self) -> str | None:
        """Why this watcher is not ready (None: it is): a leader's watches must be live;
        a standby's Lease loop must reach the API server."""
        if not self._leading():
            return self.election.problem() if self.election is not None else None
        watches = dict(self.watches)
        if not watches:
            return "leading, the watches are starting"
        found = [w.problem(kind, WATCH_GRACE_SECONDS) for kind, w in sorted(watches.items())]
        problems = [p for p in found if p is not None]
        return "; ".join(problems) if problems else None

    def _leading(self) -> bool:
        return self.election is None or self.election.leading.is_set()

    async def resync(self) -> None:
        """Match running workflows with the instances that exist (``watcher.resync``);
        only once the DBInstances were listed in this term: before that, every workflow
        would look orphaned."""
        if self.listed.is_set():
            await self.resyncs.run(set(self.instances))
