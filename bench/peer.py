"""The peer: the same steps driven the controller-runtime way, with no durability.

A classic in-process controller: watches of DBInstances and their children feed a
deduplicating work queue; worker threads run one reconcile per key (never two at once
for a key), which calls the step activities' own functions in ``dbi.pipeline.CONVERGE``
order, writes status, and requeues after the same wait ``workflows.waiting`` decides
(RequeueAfter), skips the events the watcher skips (``watcher.relevance``) and gathers
a child's events for the watcher's window as its wakes do (``watcher.wakeups``).
Nothing survives a restart: it is the baseline durability is weighed against. Run it
with ``python -m bench.peer`` (``KUBECONFIG``, ``DBI_WATCH_NAMESPACES``,
``DBI_METRICS_PORT``; ``DBI_BENCH_STEPS=stub`` stubs the converge steps, ``bench.stubs``).
Deletion is not handled: the benchmark deletes its whole stack.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import prometheus_client
from kubernetes import client as k8s
from temporalio import activity

from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.infra.postgres import shared_sessions
from activities.infra.reads import shared_reads
from activities.worker import registry
from bench import stubs
from dbi import connect, metrics, names, pipeline
from dbi.config import Config
from dbi.passes import StatusInput
from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome, StepInput, StepsInput, in_order
from dbi.streams import Listener, Source, forever
from watcher import relevance
from watcher.wakeups import WINDOW_SECONDS
from watcher.watcher import sources
from workflows.runner import failed
from workflows.waiting import PendingStreak, next_wait
from workflows.worker import ACTIVITY_THREADS, Hosted

log = logging.getLogger("dbi.peer")
STEPS_VARIABLE = "DBI_BENCH_STEPS"  # "stub": the converge steps stubbed (bench.stubs)
Key = tuple[str, str]


class WorkQueue:
    """client-go's workqueue in small: a key is queued once, and never handed to two
    workers at once (a key added while processed is queued again when done)."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._queue: list[Key] = []
        self._queued: set[Key] = set()
        self._processing: set[Key] = set()
        self._dirty: set[Key] = set()
        self._delayed: list[tuple[float, Key]] = []
        self._waiting: dict[Key, float] = {}  # one delayed add per key: its earliest time

    def add(self, key: Key) -> None:
        with self._lock:
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._queue.append(key)
                self._lock.notify()

    def add_after(self, key: Key, seconds: float) -> None:
        """Add ``key`` once ``seconds`` have passed; a key already waiting keeps the
        earlier of its two times (client-go's delaying queue), so requeues do not pile
        up, one per pass, into as many passes later."""
        ready = time.monotonic() + seconds
        with self._lock:
            if key in self._waiting and self._waiting[key] <= ready:
                return
            self._waiting[key] = ready
            heapq.heappush(self._delayed, (ready, key))
            self._lock.notify()

    def get(self, stop: threading.Event) -> Key | None:
        with self._lock:
            while not stop.is_set():
                now = time.monotonic()
                while self._delayed and self._delayed[0][0] <= now:
                    ready, key = heapq.heappop(self._delayed)
                    if self._waiting.get(key) != ready:
                        continue  # superseded by an earlier time, already handled
                    del self._waiting[key]
                    if key not in self._queued and key not in self._processing:
                        self._queued.add(key)
                        self._queue.append(key)
                    elif key in self._processing:
                        self._dirty.add(key)
                if self._queue:
                    key = self._queue.pop(0)
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                timeout = self._delayed[0][0] - now if self._delayed else 0.5
                self._lock.wait(min(timeout, 0.5))
            return None

    def done(self, key: Key) -> None:
        with self._lock:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self._queued.add(key)
                self._queue.append(key)
                self._lock.notify()


def activity_functions(ctx: Context, hosted: Hosted) -> dict[str, Callable[..., Any]]:
    """Return each step activity's function by its activity name."""
    return {
        str(activity._Definition.must_from_callable(fn).name): fn  # its registered name
        for fn in hosted(ctx)
    }


class Peer:
    def __init__(
        self,
        api: k8s.ApiClient,
        namespaces: frozenset[str] | None,
        threads: int = ACTIVITY_THREADS,
        hosted: Hosted = registry.all_activities,
    ) -> None:
        self.api = api
        self.namespaces = namespaces
        self.threads = threads
        self.fns = activity_functions(Context(kube=Kube(api), config=Config.from_env()), hosted)
        self.queue = WorkQueue()
        self.stop = threading.Event()
        self.streaks: dict[Key, int] = {}
        self.at_once: dict[Key, int] = {}
        self.pending: dict[Key, PendingStreak] = {}
        self.instances: dict[Key, relevance.Seen] = {}
        self.children = relevance.Children()
        self.seen: dict[Key, tuple[int, datetime]] = {}
        self.passes = itertools.count()

    def _call(self, name: str, argument: Any) -> Any:
        started = time.monotonic()
        try:
            return self.fns[name](argument)
        finally:
            metrics.STEP_SECONDS.labels(name).observe(time.monotonic() - started)

    def reconcile(self, key: Key) -> float | None:
        """One pass; return the RequeueAfter in seconds (None: wait for a change)."""
        namespace, name = key
        pass_id = f"{namespace}/{name}/{next(self.passes)}"  # the steps start from its read
        snapshot: InstanceSnapshot = self._call(
            pipeline.LOAD_INSTANCE,
            StepInput(namespace=namespace, name=name, uid="", pass_id=pass_id),
        )
        if not snapshot.exists or snapshot.deleting:
            return None
        step_input = StepInput(
            namespace=namespace, name=name, uid=snapshot.uid or "", pass_id=pass_id
        )
        if key not in self.seen or self.seen[key][0] != snapshot.generation:
            self.seen[key] = (snapshot.generation, datetime.now(UTC))
        # As the worker's run_pass: the same loop, each object read once a pass, each
        # login made once.
        steps = StepsInput(steps=tuple(s.name for s in pipeline.CONVERGE), step_input=step_input)
        with shared_reads(), shared_sessions():
            done = in_order(steps, self._call)
        results = list(done.results)
        if done.raised is not None:
            log.warning("step %s of %s/%s raised", done.raised, *key)
            results.append(failed(next(s for s in pipeline.CONVERGE if s.name == done.raised)))
        for result in results:
            metrics.STEP_OUTCOMES.labels(result.step, result.outcome.value, result.reason).inc()
        report = PassReport(
            workflow_id=f"peer/{namespace}/{name}",
            generation=snapshot.generation,
            power_state=snapshot.power_state,
            deleting=False,
            pipeline=[s.reported for s in pipeline.CONVERGE],
            results=results,
        )
        self._call(
            pipeline.WRITE_STATUS,
            StatusInput(
                namespace=namespace,
                name=name,
                uid=snapshot.uid or "",
                pass_id=pass_id,
                report=report,
                generation_seen_at=self.seen[key][1],
            ),
        )
        blocking = report.blocking
        transient = blocking is not None and blocking.outcome is Outcome.TRANSIENT
        self.streaks[key] = self.streaks.get(key, 0) + 1 if transient else 0
        self.pending[key] = self.pending.get(key, PendingStreak()).after(report)
        wait = next_wait(
            report,
            snapshot,
            transient_streak=self.streaks[key],
            at_once_streak=self.at_once.get(key, 0),
            pending_streak=self.pending[key].count,
            spread=random.random(),  # noqa: S311 (a jitter, not a secret)
        )
        self.at_once[key] = self.at_once.get(key, 0) + 1 if wait.at_once else 0
        return wait.timeout.total_seconds() if wait.timeout is not None else None

    def work(self) -> None:
        while (key := self.queue.get(self.stop)) is not None:
            try:
                requeue = self.reconcile(key)
            except Exception as e:
                log.warning("reconcile of %s/%s raised %s", *key, type(e).__name__)
                requeue = 5.0
            finally:
                self.queue.done(key)
            if requeue is not None:
                self.queue.add_after(key, requeue)

    def handler(self, kind: str) -> Callable[[str, dict[str, Any]], None]:
        def on_event(event: str, obj: dict[str, Any]) -> None:
            meta = obj.get("metadata", {})
            namespace = meta.get("namespace", "")
            if self.namespaces is not None and namespace not in self.namespaces:
                return
            # The same predicates as the watcher's, so both engines run the same passes.
            if kind == "DBInstance":
                key = (namespace, meta["name"])
                before = self.instances.get(key)
                self.instances[key] = relevance.Seen.of(obj)
                if relevance.instance_event_matters(event, obj, before):
                    self.queue.add(key)
                return
            name = (meta.get("labels") or {}).get(names.INSTANCE_LABEL)
            if name and self.children.event_matters(kind, event, obj):
                # Gathered for the watcher's window, as its wakes are (watcher/wakeups.py).
                self.queue.add_after((namespace, name), WINDOW_SECONDS)

        return on_event

    def run(self) -> None:
        watched: list[Source] = sources(self.api, self.namespaces)
        for source in watched:
            threading.Thread(
                target=forever,
                args=(self.api, source, Listener(self.handler(source.kind)), self.stop),
                daemon=True,
            ).start()
        workers = [threading.Thread(target=self.work, daemon=True) for _ in range(self.threads)]
        for w in workers:
            w.start()
        log.info("peer reconciling with %d threads", self.threads)
        self.stop.wait()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    only = os.environ.get("DBI_WATCH_NAMESPACES")
    namespaces = frozenset(n for n in (only or "").split(",") if n) or None
    if port := os.environ.get("DBI_METRICS_PORT"):
        prometheus_client.start_http_server(int(port), addr="127.0.0.1")
    # The benchmark's stub mode (--steps stub) stubs the converge steps here too.
    stubbed = os.environ.get(STEPS_VARIABLE) == "stub"
    hosted = stubs.activities if stubbed else registry.all_activities
    peer = Peer(connect.kubernetes(connections=ACTIVITY_THREADS), namespaces, hosted=hosted)
    signal.signal(signal.SIGTERM, lambda *_: peer.stop.set())
    signal.signal(signal.SIGINT, lambda *_: peer.stop.set())
    peer.run()


if __name__ == "__main__":
    main()
