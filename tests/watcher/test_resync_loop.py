"""The resync runs beside the loop that watches leadership (plain data: no API server,
no Temporal): a slow one, as at 10,000 instances on a loaded server, neither holds that
loop up nor gets a second one started beside it, and it ends with the term."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, cast

from tests.polling import until
from tests.watcher.recording import Recording
from watcher.watcher import Watcher


async def test_a_slow_resync_holds_up_neither_the_loop_nor_another_resync() -> None:
    watcher = Watcher(
        api=cast(Any, None), client=cast(Any, None), wakeups=Recording(), resync_seconds=0.05
    )
    calls = 0
    cancelled = False

    async def running() -> set[tuple[str, str]]:
        """A visibility query that does not answer."""
        nonlocal calls, cancelled
        calls += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled = True
            raise
        return set()

    def no_watches(loop: asyncio.AbstractEventLoop, term: threading.Event) -> None:
        watcher.listed.set()  # as if the DBInstances were listed whole

    watcher.resyncs._running = running  # type: ignore[method-assign]
    watcher._start_watches = no_watches  # type: ignore[method-assign]
    task = asyncio.create_task(watcher.run())
    try:
        await until(lambda: calls == 1, timeout=5, what="a resync")
        await asyncio.sleep(1.0)  # twenty resync periods
        assert calls == 1  # none started beside the one still running
        watcher.stop.set()
        await asyncio.wait_for(task, 2)  # the loop saw the stop: not held by the resync
        assert cancelled  # the term's resync ended with it
    finally:
        task.cancel()
