"""The resync lists every running workflow only when it must (plain data: no API
server, no Temporal): at 10,000 instances a list costs the Temporal server seconds of
CPU, a count a hundredth of one."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from dbi import names
from tests.watcher.recording import Recording
from watcher.relevance import Seen
from watcher.resync import FULL_RESYNC_SECONDS
from watcher.watcher import Watcher


class Visibility:
    """A Temporal client's visibility calls: the running workflows' ids, and the calls made."""

    def __init__(self, running: list[tuple[str, str]]) -> None:
        self.running = running
        self.calls: list[str] = []

    async def count_workflows(self, query: str, **_: Any) -> Any:
        self.calls.append("count")
        return type("Count", (), {"count": len(self.running)})()

    async def list_workflows(self, query: str, **_: Any) -> Any:
        self.calls.append("list")
        for namespace, name in self.running:
            yield type("Execution", (), {"id": names.workflow_id(namespace, name)})()


def watching(instances: list[str], running: list[str]) -> tuple[Watcher, Visibility, Recording]:
    visibility, wakeups = Visibility([("ns", n) for n in running]), Recording()
    watcher = Watcher(api=cast(Any, None), client=cast(Any, visibility), wakeups=wakeups)
    watcher.instances = {("ns", n): Seen(1, False) for n in instances}
    watcher.listed.set()
    return watcher, visibility, wakeups


def noted(wakeups: Recording) -> list[tuple[str, bool]]:
    """Each instance the resync woke, and whether as gone."""
    return [(name, gone) for _, name, gone, _ in wakeups.notes]


async def test_a_count_that_matches_the_instances_lists_nothing_until_the_full_resync() -> None:
    watcher, visibility, wakeups = watching(["a", "b"], ["a", "b"])
    await watcher.resync()  # the term's first: every workflow matched one by one
    await watcher.resync()
    await watcher.resync()
    assert visibility.calls == ["list", "count", "count"]
    watcher.resyncs.full_at = asyncio.get_running_loop().time()  # FULL_RESYNC_SECONDS on
    await watcher.resync()
    assert visibility.calls[-1] == "list" and wakeups.notes == []
    assert FULL_RESYNC_SECONDS >= 60  # the count's own minute is the shorter


async def test_a_workflow_terminated_by_hand_is_started_at_the_next_resync() -> None:
    watcher, visibility, wakeups = watching(["a", "b"], ["a", "b"])
    await watcher.resync()
    visibility.running.pop()  # b's workflow terminated: one fewer running
    await watcher.resync()
    assert visibility.calls == ["list", "count", "list"]
    assert noted(wakeups) == [("b", False)]


async def test_an_orphan_is_told_its_instance_is_gone_at_the_next_resync() -> None:
    watcher, _, wakeups = watching(["a", "b"], ["a", "b"])
    await watcher.resync()
    del watcher.instances[("ns", "b")]  # deleted while no watch ran
    await watcher.resync()
    assert noted(wakeups) == [("b", True)]


async def test_a_missing_workflow_and_an_orphan_at_once_wait_for_the_full_resync() -> None:
    """Their count is the instances': the one case a count cannot see."""
    watcher, visibility, wakeups = watching(["a", "b"], ["a", "b"])
    await watcher.resync()
    visibility.running = [("ns", "a"), ("ns", "c")]  # b's gone, c's an orphan
    await watcher.resync()
    assert wakeups.notes == []
    watcher.resyncs.full_at = 0.0
    await watcher.resync()
    assert sorted(noted(wakeups)) == [("b", False), ("c", True)]
