"""A whole (re)list of DBInstances is the truth: what it no longer reports was deleted
while no watch ran (plain data: the handlers, no API server)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from watcher.relevance import Seen
from watcher.wakeups import Origin, Wakeups
from watcher.watcher import Watcher


class Recording(Wakeups):
    """Wake-ups that record what they would signal."""

    def __init__(self) -> None:
        super().__init__(client=cast(Any, None))
        self.notes: list[tuple[str, str, bool, bool]] = []  # and gone, relist

    def note(
        self,
        key: tuple[str, str],
        reason: str,
        generation: int | None,
        *,
        gone: bool = False,
        retry: bool = False,
        origin: Origin = Origin.CHANGE,
    ) -> None:
        self.notes.append((*key, gone, origin is Origin.RELIST))


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
