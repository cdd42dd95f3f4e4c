"""The watcher's wakes against the real Temporal dev server: a burst of instances (a
relist, a fleet applied at once, a resync that finds many without a workflow) is
signaled a few at a time, every instance gets its workflow started with its wake, and a
change does not wait behind a relist."""

from __future__ import annotations

import asyncio
import secrets
import threading
from typing import Any, cast

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from dbi import names, stored
from dbi.messages import RECORDED_RUN_EVENTS, RUN_EVENTS, Wake, WorkflowInput
from tests.polling import until
from watcher.relevance import Seen
from watcher.wakeups import Origin, Wakeups
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

BURST = 40
IN_FLIGHT = 4


class InFlight:
    """Counts the signals ``wakeups`` has in flight; ``most``: the most at once."""

    def __init__(self, wakeups: Wakeups) -> None:
        self.now = self.most = 0
        send = wakeups.signal

        async def counted(namespace: str, name: str, wake: Wake) -> None:
            self.now += 1
            self.most = max(self.most, self.now)
            try:
                await send(namespace, name, wake)
            finally:
                self.now -= 1

        wakeups.signal = counted  # type: ignore[method-assign]


async def test_a_burst_of_wakes_goes_out_a_few_at_a_time_and_none_is_lost(
    temporal_client: Client, namespace: str
) -> None:
    queue = f"nobody-{secrets.token_hex(3)}"  # no worker: the workflows only start
    wakeups = Wakeups(temporal_client, task_queue=queue, in_flight=IN_FLIGHT)
    in_flight = InFlight(wakeups)
    instances = [f"db{i}" for i in range(BURST)]
    for name in instances:
        wakeups.note((namespace, name), "ADDED", 1)
    handles = [
        temporal_client.get_workflow_handle(names.workflow_id(namespace, n)) for n in instances
    ]
    try:
        await until(lambda: wakeups.counters.signals_sent == BURST, what="every wake sent")
        assert in_flight.most == IN_FLIGHT  # never more at once, and not one by one
        described = await asyncio.gather(*(h.describe() for h in handles))
        assert {d.status for d in described} == {WorkflowExecutionStatus.RUNNING}
        assert wakeups.counters.send_failures == 0
        # Each starts with the runs' limit written out (an input without it is a run
        # begun before RUN_EVENTS was lowered: RECORDED_RUN_EVENTS).
        started = await anext(aiter(handles[0].fetch_history_events()))
        payloads = started.workflow_execution_started_event_attributes.input.payloads
        (given,) = await temporal_client.data_converter.decode(payloads, [WorkflowInput])
        assert given.history_limit == RUN_EVENTS != RECORDED_RUN_EVENTS
    finally:
        await asyncio.gather(*(h.terminate() for h in handles), return_exceptions=True)


RELISTED = 30


async def test_a_change_goes_before_the_wakes_a_relist_queued(
    temporal_client: Client, namespace: str
) -> None:
    """A relist of the fleet queues a wake for every instance; a user's change that comes
    meanwhile, to a new instance or to one whose relist wake still waits, takes the next
    slot, not its place after the whole fleet."""
    queue = f"nobody-{secrets.token_hex(3)}"
    wakeups = Wakeups(temporal_client, task_queue=queue, in_flight=2)
    order: list[str] = []
    send = wakeups.signal

    async def recorded(namespace: str, name: str, wake: Wake) -> None:
        order.append(name)
        await send(namespace, name, wake)

    wakeups.signal = recorded  # type: ignore[method-assign]
    relisted = [f"db{i}" for i in range(RELISTED)]
    for name in relisted:
        wakeups.note((namespace, name), "relisted", 1, origin=Origin.RELIST)
    await asyncio.sleep(0)  # two in flight, the rest in line
    assert order == ["db0", "db1"]
    wakeups.note((namespace, "changed"), "DBInstance changed modified", 1)
    wakeups.note((namespace, relisted[-1]), "DBInstance db29 modified", 2)  # waits: promoted
    handles = [
        temporal_client.get_workflow_handle(names.workflow_id(namespace, n))
        for n in [*relisted, "changed"]
    ]
    try:
        await until(lambda: wakeups.counters.signals_sent == RELISTED + 1, what="every wake")
        assert set(order[2:4]) == {"changed", relisted[-1]}, order
        assert order[4:] == relisted[2:-1]  # the relist's own order kept
        assert wakeups.counters.send_failures == 0
    finally:
        await asyncio.gather(*(h.terminate() for h in handles), return_exceptions=True)


async def test_a_resync_that_finds_many_workflows_missing_starts_them_a_few_at_a_time(
    temporal_client: Client, namespace: str
) -> None:
    """Instances the resync finds with no running workflow get theirs through the same
    line as every wake: a few at a time, the resync itself done at once, none left
    unstarted."""
    queue = f"nobody-{secrets.token_hex(3)}"
    wakeups = Wakeups(temporal_client, task_queue=queue, in_flight=IN_FLIGHT)
    in_flight = InFlight(wakeups)
    watcher = Watcher(api=cast(Any, None), client=temporal_client, wakeups=wakeups)
    instances = [f"db{i}" for i in range(BURST)]
    watcher.instances = {(namespace, n): Seen(1, False) for n in instances}
    watcher.listed.set()
    handles = [
        temporal_client.get_workflow_handle(names.workflow_id(namespace, n)) for n in instances
    ]
    try:
        await watcher.resync()
        assert wakeups.counters.signals_sent == 0  # queued, not sent by the resync itself
        await until(lambda: wakeups.counters.signals_sent == BURST, what="every workflow started")
        assert in_flight.most == IN_FLIGHT
        described = await asyncio.gather(*(h.describe() for h in handles))
        assert {d.status for d in described} == {WorkflowExecutionStatus.RUNNING}
    finally:
        await asyncio.gather(*(h.terminate() for h in handles), return_exceptions=True)


GATHER_WINDOW = 1.0


def _claim(instance: str, name: str, phase: str) -> dict[str, Any]:
    """A claim of ``instance`` that the storage (not the orchestrator) wrote last."""
    write = {"manager": "csi-provisioner", "operation": "Update", "time": "2026-12-04T06:49:24Z"}
    labels = {names.INSTANCE_LABEL: instance}
    meta = {"name": name, "namespace": "", "labels": labels, "managedFields": [write]}
    return {"metadata": meta, "status": {"phase": phase}}


async def test_a_childs_writes_in_a_row_are_one_wake_and_a_users_change_is_not_held(
    temporal_client: Client, namespace: str
) -> None:
    """Two claims bound one after the other, each past the window since the last wake
    (as the stand-in and Kubernetes bind a VM's two disks), are one wake, sent a window
    after the first; a user's change to another instance meanwhile goes at once."""
    queue = f"nobody-{secrets.token_hex(3)}"
    wakeups = Wakeups(temporal_client, task_queue=queue, window=GATHER_WINDOW)
    order: list[tuple[str, str]] = []
    send = wakeups.signal

    async def recorded(namespace: str, name: str, wake: Wake) -> None:
        order.append((name, wake.reason))
        await send(namespace, name, wake)

    wakeups.signal = recorded  # type: ignore[method-assign]
    watcher = Watcher(api=cast(Any, None), client=temporal_client, wakeups=wakeups)
    loop, term = asyncio.get_running_loop(), threading.Event()

    def event(kind: str, event: str, obj: dict[str, Any]) -> None:
        obj["metadata"]["namespace"] = namespace
        watcher.handle(loop, kind, term)(event, obj)

    def instance(name: str, generation: int) -> dict[str, Any]:
        return {"metadata": {"name": name, "generation": generation}}

    handles = [
        temporal_client.get_workflow_handle(names.workflow_id(namespace, n)) for n in ("a", "b")
    ]
    try:
        event("DBInstance", "ADDED", instance("a", 1))
        event("DBInstance", "ADDED", instance("b", 1))
        await until(lambda: wakeups.counters.signals_sent == 2, what="both instances' wakes")
        await asyncio.sleep(GATHER_WINDOW)  # past the window: a wake would go at once
        event("PersistentVolumeClaim", "MODIFIED", _claim("a", "a-data", "Bound"))
        await asyncio.sleep(GATHER_WINDOW / 4)
        event("PersistentVolumeClaim", "MODIFIED", _claim("a", "a-root", "Bound"))
        event("DBInstance", "MODIFIED", instance("b", 2))  # a user's change
        await until(lambda: wakeups.counters.signals_sent == 4, what="the two wakes")
        assert order[2:] == [
            ("b", "DBInstance b modified"),
            ("a", "PersistentVolumeClaim a-root modified"),
        ]
        signaled = [
            e.workflow_execution_signaled_event_attributes.input.payloads
            async for e in handles[0].fetch_history_events()
            if e.workflow_execution_signaled_event_attributes.signal_name == names.WAKE
        ]
        wakes = [(await temporal_client.data_converter.decode(p, [Wake]))[0] for p in signaled]
        assert [w.reason for w in wakes] == [  # the workflow's two wakes: two passes
            "DBInstance a added",
            "PersistentVolumeClaim a-root modified",
        ]
    finally:
        await asyncio.gather(*(h.terminate() for h in handles), return_exceptions=True)


async def test_a_new_instances_wake_shows_it_even_after_a_failed_signal(
    temporal_client: Client, namespace: str
) -> None:
    """The signal-with-start of a new instance carries the instance as its event showed
    it (what the first pass's load should find), in the workflow's history; a signal
    that failed is sent again with it."""
    queue = f"nobody-{secrets.token_hex(3)}"
    wakeups = Wakeups(temporal_client, task_queue=queue)
    send, tries = wakeups.signal, []

    async def fails_once(namespace: str, name: str, wake: Wake) -> None:
        tries.append(wake.seen)
        if len(tries) == 1:
            raise RuntimeError("Temporal unreachable")
        await send(namespace, name, wake)

    wakeups.signal = fails_once  # type: ignore[method-assign]
    watcher = Watcher(api=cast(Any, None), client=temporal_client, wakeups=wakeups)
    added = {
        "metadata": {"name": "db", "namespace": namespace, "uid": "u-1", "generation": 1},
        "spec": {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}},
    }
    handle = temporal_client.get_workflow_handle(names.workflow_id(namespace, "db"))
    try:
        watcher.handle(asyncio.get_running_loop(), "DBInstance", threading.Event())("ADDED", added)
        await until(lambda: wakeups.counters.signals_sent == 1, what="the wake, sent again")
        assert wakeups.counters.send_failures == 1
        signaled = [
            e.workflow_execution_signaled_event_attributes.input.payloads
            async for e in handle.fetch_history_events()
            if e.workflow_execution_signaled_event_attributes.signal_name == names.WAKE
        ]
        (wake,) = [(await temporal_client.data_converter.decode(p, [Wake]))[0] for p in signaled]
        assert wake.seen is not None
        assert wake.seen.expected() == stored.seen(added)
        assert len(tries) == 2 and tries[0] == tries[1]
    finally:
        await handle.terminate()
