"""Turn Kubernetes events into ``wake`` signals, at most one per instance per window.

The first event for an instance is signaled at once; events that follow within the
window are folded into one more signal at its end (carrying the newest generation), so
a storm of events cannot exhaust a workflow's signal budget, and the last change is
never left unsignaled. A child's event (its VM, VMI, claims, Secrets, Services) is
gathered instead: signaled one window after it came, with the writes that follow it
(a VMI Running and its VM Running, a VM's two claims bound within a window). Signaled at
once, they came one after another, each a window after the last signal, so each was a
signal, a workflow task and a pass (docs/benchmarks.md). A user's change (a
DBInstance's) is never gathered: one that comes during a child's gather goes with it,
as before no later than a window after the event before it. At most ``MAX_IN_FLIGHT``
signals are sent at once; the others wait their turn: first the wakes a change asked
for, then those only a relist asked for (each in the order they came), so a user's
change is not queued behind a relist of the whole fleet. A signal is a
signal-with-start: an instance whose workflow does not run gets one started, with its
search attributes.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from dbi.messages import RUN_EVENTS, TASK_TIMEOUT, SeenInstance, Wake, WorkflowInput

log = logging.getLogger("dbi.watcher")
tracer = trace.get_tracer("dbi.watcher")
WINDOW_SECONDS = 0.25
# A failed signal is sent again after 1 s, then 2, 4, ... up to this, per instance.
MAX_RETRY_SECONDS = 30.0
# How long one signal may wait for Temporal: a stopped server must fail it, not hang it.
RPC_TIMEOUT = timedelta(seconds=10)
# Signals in flight at once; the rest wait their turn, changes before relists, still
# folding the events that come meanwhile. Unbounded, a burst of 10,000 (a relist, a
# fleet applied at once) sent 10,000 signal-with-starts together: Temporal could not
# answer them within RPC_TIMEOUT, dropped the work of each it was cut off from, and
# the retries kept it saturated (docs/benchmarks.md).
MAX_IN_FLIGHT = 16


def why(e: BaseException) -> str:
    """A failure for the log: its type, and a Temporal error's status and message."""
    if isinstance(e, RPCError):
        return f"RPCError {e.status.name}: {e.message}"
    return type(e).__name__


class Origin(enum.Enum):
    """Whose event a wake is for."""

    CHANGE = "change"  # a DBInstance's: signaled at once, past the window since the last
    CHILD = "child"  # a child's: gathered for a window, with the writes that follow it
    RELIST = "relist"  # only a relist's: it may wait behind changes for a slot


@dataclass
class Counters:
    """What the watcher did, for logs and the metrics endpoint."""

    events_seen: int = 0
    events_ignored: int = 0  # not worth a pass (watcher/relevance.py)
    signals_sent: int = 0
    coalesced: int = 0
    send_failures: int = 0


@dataclass
class _Pending:
    reason: str
    generation: int | None
    gone: bool = False  # the instance was deleted since the last signal
    retry: bool = False  # a user's decision (a dbi.dev/ annotation) since the last signal
    urgent: bool = False  # a change, not only a relist, since the last signal
    events: int = 0  # since the last signal
    last_sent: float = 0.0
    scheduled: bool = False
    failures: int = 0  # signals in a row that failed (Temporal unreachable, say)
    seen: SeenInstance | None = None  # the instance as its newest new generation showed it
    turn: asyncio.Future[None] | None = None  # set while it waits for a slot


@dataclass
class Wakeups:
    client: Client
    task_queue: str = names.TASK_QUEUE
    window: float = WINDOW_SECONDS
    counters: Counters = field(default_factory=Counters)
    in_flight: int = MAX_IN_FLIGHT
    _pending: dict[tuple[str, str], _Pending] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _free: int = field(init=False)  # slots no signal holds
    # The instances waiting for a slot: those a change woke, then those a relist woke.
    _changed: deque[tuple[str, str]] = field(default_factory=deque)
    _relisted: deque[tuple[str, str]] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self._free = self.in_flight

    def ignore(self) -> None:
        """Count an event that is not worth a pass."""
        self.counters.events_ignored += 1

    def note(  # noqa: PLR0913 (what one event says of its instance)
        self,
        key: tuple[str, str],
        reason: str,
        generation: int | None,
        *,
        gone: bool = False,
        retry: bool = False,
        origin: Origin = Origin.CHANGE,
        seen: SeenInstance | None = None,
    ) -> None:
        """Record an event for an instance (``key``: its namespace and name; ``gone``: its
        deletion; ``retry``: a decision that ends a Terminal wait; ``origin``: whose
        event, ``Origin``; ``seen``: the instance, new or of a new generation); signal
        now, or once the window has passed."""
        self.counters.events_seen += 1
        entry = self._pending.setdefault(key, _Pending(reason, generation))
        entry.reason = reason
        entry.seen = seen or entry.seen
        entry.gone = entry.gone or gone
        entry.retry = entry.retry or retry
        if not (origin is Origin.RELIST or entry.urgent):
            entry.urgent = True
            if entry.turn is not None:  # waiting behind relists: now before them
                self._changed.append(key)
        entry.events += 1
        if generation is not None:
            entry.generation = max(entry.generation or 0, generation)
        if entry.scheduled:
            self.counters.coalesced += 1
            return
        delay = max(0.0, entry.last_sent + self.window - time.monotonic())
        self._schedule(key, max(delay, self.window) if origin is Origin.CHILD else delay)

    def _schedule(self, key: tuple[str, str], delay: float) -> None:
        self._pending[key].scheduled = True
        task = asyncio.get_running_loop().create_task(self._send_after(key, delay))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send_after(self, key: tuple[str, str], delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        await self._take_turn(key)
        try:
            await self._send(key)
        finally:
            self._pass_turn()

    async def _take_turn(self, key: tuple[str, str]) -> None:
        """Take a slot, waiting in line when none is free (a slot is free only while no
        one waits: ``_pass_turn`` hands it on first)."""
        if self._free:
            self._free -= 1
            return
        entry = self._pending[key]
        turn = entry.turn = asyncio.get_running_loop().create_future()
        (self._changed if entry.urgent else self._relisted).append(key)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self._pass_turn()  # handed a slot it will not use
            raise
        finally:
            entry.turn = None

    def _pass_turn(self) -> None:
        """Hand a slot given back to the first instance waiting, changes first. A key
        whose wait ended (a promoted one's place among the relists) is passed over."""
        for line in (self._changed, self._relisted):
            while line:
                turn = self._pending[line.popleft()].turn
                if turn is not None and not turn.done():
                    turn.set_result(None)
                    return
        self._free += 1

    async def _send(self, key: tuple[str, str]) -> None:
        entry = self._pending[key]
        entry.scheduled = False
        entry.last_sent = time.monotonic()
        events, entry.events = entry.events, 0
        gone, entry.gone = entry.gone, False
        retry, entry.retry = entry.retry, False
        urgent, entry.urgent = entry.urgent, False
        seen, entry.seen = entry.seen, None
        try:
            await self._traced_signal(key, entry, events, gone=gone, retry=retry, seen=seen)
            entry.failures = 0
        except Exception as e:
            self.counters.send_failures += 1
            delay = min(2.0**entry.failures, MAX_RETRY_SECONDS)
            entry.failures += 1
            log.warning(
                "wake of %s/%s failed (%s); retrying in %.0fs",
                *key,
                why(e),
                delay,
                extra={"instance": "/".join(key)},
            )
            entry.events += events
            entry.gone = entry.gone or gone
            entry.retry = entry.retry or retry
            entry.urgent = entry.urgent or urgent
            entry.seen = entry.seen or seen
            if not entry.scheduled:
                self._schedule(key, delay)

    async def _traced_signal(
        self,
        key: tuple[str, str],
        entry: _Pending,
        events: int,
        *,
        gone: bool,
        retry: bool,
        seen: SeenInstance | None = None,
    ) -> None:
        """Signal under a ``dbi.wake`` span whose context the wake carries, so the pass it
        causes joins this trace (the span records a failure)."""
        attributes: dict[str, str | int] = {
            "dbi.instance": "/".join(key),
            "dbi.reason": entry.reason[:200],
            "dbi.events": events,
        }
        if entry.generation is not None:
            attributes["dbi.generation"] = entry.generation
        with tracer.start_as_current_span(
            "dbi.wake", kind=SpanKind.PRODUCER, attributes=attributes
        ):
            carrier: dict[str, str] = {}
            propagate.inject(carrier)
            wake = Wake(
                reason=entry.reason[:200],
                generation=entry.generation,
                trace=carrier,
                gone=gone,
                retry=retry,
                seen=seen,
            )
            if gone:
                await self.signal_existing(*key, wake)
            else:
                await self.signal(*key, wake)

    async def signal(self, namespace: str, name: str, wake: Wake) -> None:
        """Signal ``wake`` to the instance's workflow, starting it if it does not run."""
        await self.client.start_workflow(
            names.WORKFLOW_TYPE,
            WorkflowInput(namespace=namespace, name=name, history_limit=RUN_EVENTS),
            id=names.workflow_id(namespace, name),
            task_queue=self.task_queue,
            task_timeout=TASK_TIMEOUT,
            start_signal=names.WAKE,
            start_signal_args=[wake],
            rpc_timeout=RPC_TIMEOUT,
            search_attributes=names.instance_attributes(namespace, name),
        )
        self.counters.signals_sent += 1

    async def signal_existing(self, namespace: str, name: str, wake: Wake) -> None:
        """Signal ``wake`` to the instance's running workflow; none running is fine (a
        deleted instance's workflow is not started only to find it gone)."""
        handle = self.client.get_workflow_handle(names.workflow_id(namespace, name))
        try:
            await handle.signal(names.WAKE, wake, rpc_timeout=RPC_TIMEOUT)
        except RPCError as e:
            if e.status is not RPCStatusCode.NOT_FOUND:
                raise
            return
        self.counters.signals_sent += 1

    async def drain(self, timeout: float = 5.0) -> None:
        """Wait for scheduled signals to go out (graceful shutdown)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
