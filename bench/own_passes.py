"""The own passes of settled instances, at their steady-state rate, in an idle window.

A settled instance's workflow runs its own pass every ``RECHECK_NET`` (six hours); the
worker re-checks it in between (``activities.worker.rechecks``). An idle window of minutes
right after a converge holds none of those passes, so it shows the trough, not the
steady state. ``OwnPasses`` brings them in at the rate the steady state holds them:
N per ``RECHECK_NET``, each a ``wake`` with ``settle`` (what a starting or stopping
worker asks for), which ends the instance's Ready wait and runs the idle pass that
settles it again, as its timer would. The instances passed longest ago come first,
as the timers would bring them, so a worker whose cache holds only part of the fleet
replays their runs as it would then.

A pass asked this way costs the Temporal server a little more than one its timer
brings (a signal, and the timer it ends is cancelled and started again): an upper
bound on the steady state's passes, not an estimate under it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Self

from temporalio.client import Client

from dbi import connect, names
from dbi.messages import RECHECK_NET, Wake

WAKE = Wake(reason="bench: a settled instance's own pass, at the steady state's rate", settle=True)


def rate(n: int) -> float:
    """Own passes per second for ``n`` settled instances."""
    return n / RECHECK_NET.total_seconds()


def oldest_first(
    namespace: str, instances: list[str], ready: dict[tuple[str, int], float], reaction: int
) -> list[str]:
    """The instances' workflow ids, the one whose last workflow pass is the oldest first:
    by the time each turned Ready (its settling pass came an interval later), the
    ``reaction`` first ones, which the bench patched since, last."""
    patched = instances[:reaction]
    rest = sorted(instances[reaction:], key=lambda n: ready[(n, 1)])
    return [names.workflow_id(namespace, n) for n in [*rest, *patched]]


def due(started: float, per_second: float, now: float) -> int:
    """How many passes are due ``now`` (monotonic) in a window begun at ``started``:
    one in the middle of each 1/``per_second`` slice, so a window holds as many as the
    rate says, rounded."""
    if per_second <= 0:
        return 0
    return max(0, int((now - started) * per_second + 0.5))


class OwnPasses:
    """Ask the workflows of ``ids`` (in that order, the first passed longest ago) for
    their own pass at ``per_second``, from a thread of its own, while in the block."""

    def __init__(self, address: str, ids: Sequence[str], per_second: float) -> None:
        self.address = address
        self.ids = list(ids)
        self.per_second = per_second
        self.asked = 0
        self.failed = 0
        self._client: Client | None = None
        self._error: Exception | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="own-passes", daemon=True)

    def __enter__(self) -> Self:
        if self.ids and self.per_second > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        if self._error is not None:  # the window did not hold what it claims to
            raise RuntimeError(f"own passes: stopped asking: {self._error}") from self._error

    def _run(self) -> None:
        try:
            asyncio.run(self._ask())
        except Exception as e:  # raised in the caller's thread as the block ends
            self._error = e

    async def _ask(self) -> None:
        await self._connect()
        started = time.monotonic()
        while not self._stop.is_set():
            sent = self.asked + self.failed
            if due(started, self.per_second, time.monotonic()) <= sent:
                await asyncio.sleep(0.05)
                continue
            workflow_id = self.ids[sent % len(self.ids)]
            try:
                await self._signal(workflow_id)
                self.asked += 1
            except Exception:  # gone, or the server busy: counted, not retried
                self.failed += 1

    async def _connect(self) -> None:
        self._client = await connect.temporal(self.address)

    async def _signal(self, workflow_id: str) -> None:
        assert self._client is not None
        await self._client.get_workflow_handle(workflow_id).signal(names.WAKE, WAKE)
