"""A whole (re)list of DBInstances is the truth: what it no longer reports was deleted
while no watch ran (plain data: the handlers, no API server)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from dbi import stored
from tests.watcher.recording import Recording
from watcher.relevance import Seen
from watcher.watcher import Watcher


async def test_a_relist_forgets_the_instances_it_no_longer_reports_and_ends_them() -> None:
    """An instance a relist does not report is forgotten and its workflow told it is
    gone, a change not a relist; a reported one is kept and woken as a relist (it may
    wait behind changes); the resync may run once the list is whole."""
    wakeups = Recording()
    watcher = Watcher(api=cast(Any, None), client=cast(Any, None), wakeups=wakeups)
    watcher.instances[("ns", "kept")] = Seen(1, False)
    watcher.instances[("ns", "deleted")] = Seen(1, False)
    loop, term = asyncio.get_running_loop(), threading.Event()
    handler = watcher.handle(loop, "DBInstance", term)

    handler("SYNC", {"metadata": {"name": "kept", "namespace": "ns", "generation": 1}})
    assert not watcher.listed.is_set()
    watcher.listed_whole(loop, term)()
    handler("MODIFIED", {"metadata": {"name": "kept", "namespace": "ns", "generation": 2}})
    await asyncio.sleep(0.05)  # the handlers hand their notes to the loop

    assert set(watcher.instances) == {("ns", "kept")}
    assert sorted(wakeups.notes) == [
        ("ns", "deleted", True, False),
        ("ns", "kept", False, False),  # its spec changed: a change
        ("ns", "kept", False, True),
    ]
    assert watcher.listed.is_set()


async def test_a_relist_of_one_namespace_forgets_only_that_namespace() -> None:
    """Watching namespaces one by one, a relist of ``a`` is whole for ``a`` alone: it
    forgets what ``a`` no longer holds and never touches ``b``; the resync waits until
    every watched namespace was listed."""
    wakeups = Recording()
    watcher = Watcher(
        api=cast(Any, None),
        client=cast(Any, None),
        wakeups=wakeups,
        namespaces=frozenset({"a", "b"}),
    )
    watcher.instances[("a", "kept")] = Seen(1, False)
    watcher.instances[("a", "deleted")] = Seen(1, False)
    watcher.instances[("b", "other")] = Seen(1, False)
    watcher.unlisted = {"a", "b"}
    loop, term = asyncio.get_running_loop(), threading.Event()

    watcher.handle(loop, "DBInstance", term, "a")(
        "SYNC", {"metadata": {"name": "kept", "namespace": "a", "generation": 1}}
    )
    watcher.listed_whole(loop, term, "a")()
    await asyncio.sleep(0.05)

    assert set(watcher.instances) == {("a", "kept"), ("b", "other")}
    assert sorted(wakeups.notes) == [("a", "deleted", True, False), ("a", "kept", False, True)]
    assert not watcher.listed.is_set()  # b was not listed yet: no resync
    watcher.listed_whole(loop, term, "b")()
    await asyncio.sleep(0.05)
    assert ("b", "other") not in watcher.instances  # b's list did not report it
    assert watcher.listed.is_set()


def instance(generation: int, **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "db",
            "namespace": "ns",
            "uid": "u-1",
            "generation": generation,
            "annotations": annotations,
        },
        "spec": {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}},
    }


async def test_a_wake_carries_the_instance_when_new_or_of_a_new_generation() -> None:
    """The wake of a new instance, or of its new generation, carries the instance as the
    pass's load would find it (the pass may then run with its load); a relist's, an
    annotation's and a child's carry nothing; a status write wakes nobody."""
    wakeups = Recording()
    watcher = Watcher(api=cast(Any, None), client=cast(Any, None), wakeups=wakeups)
    loop, term = asyncio.get_running_loop(), threading.Event()
    handler = watcher.handle(loop, "DBInstance", term)

    handler("ADDED", instance(1))
    written = {**instance(1), "status": {"phase": "Provisioning"}}
    handler("MODIFIED", written)
    handler("MODIFIED", instance(2))
    handler("MODIFIED", instance(2, **{"dbi.dev/adopt": "u-0"}))
    handler("SYNC", instance(2))
    watcher.handle(loop, "Service", term)(
        "MODIFIED",
        {"metadata": {"name": "db", "namespace": "ns", "labels": {"dbi.dev/instance": "db"}}},
    )
    await asyncio.sleep(0.05)

    seen = [(reason, s.expected() if s else None) for reason, s in wakeups.seen]
    assert seen == [
        ("DBInstance db added", stored.seen(instance(1))),
        ("DBInstance db modified", stored.seen(instance(2))),
        ("DBInstance db modified", None),
        ("relisted", None),
        ("Service db modified", None),
    ]
    assert seen[1][1] is not None and seen[1][1].generation == 2
