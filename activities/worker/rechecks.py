"""Re-checks: the worker checks a settled instance between its workflow's passes.

A pass with nothing to serve that ran every step to Satisfied and wrote its status
*settles* the instance: an idle one (``load_and_run_pass``) that found the instance as
the last pass did, or one that loaded first and was given what its load found
(``run_pass`` with ``PassInput.settle``: the pass that made the instance Ready, a woken
one). The worker that ran it keeps the pass's input, as an idle pass's (its reads from
the views), and, every healthCheckInterval, looks again the way that pass did
(``activities.worker.passes.Passes.recheck``: the load, the steps' observations, the status
they would derive), from
its views, acting on nothing: a re-check that finds the same records nothing (the
counter ``dbi_rechecks_total``); one that finds anything else (a step would act, a step
is not Satisfied or raised, the status would change, the instance is not the one the
pass loaded) wakes the workflow, whose next pass reads afresh and is recorded as any
pass is. Meanwhile the workflow waits ``RECHECK_NET`` (``dbi.messages``, 6 h): its own
pass then is the safety net for a worker that went away, and settles the instance
again. A worker that starts asks every instance for an idle pass, spread over an
interval (``Rechecks.start``); one that stops asks its settled instances for one, which
the workers still polling run and settle (``Rechecks.hand_off``).

A pass that waits on a transition whose end the watcher announces (a VM starting or
stopping: its last step Pending and ``announced``, every step before it Satisfied)
hands the worker its fallback the same way (``dbi.passes.awaits``): the worker looks again after
the step's hint (30 s), as often, and wakes the workflow when a look finds anything
else; the workflow waits ``AWAIT_NET`` (5 min) for its own pass, or the watcher's wake.

So a Ready instance costs the Temporal server a workflow task every six hours instead
of one a healthCheckInterval, a booting VM none until it runs, and every look still
happens on time (docs/idle.md, "Re-checks").
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from dbi import metrics
from dbi.messages import Wake
from dbi.passes import LoadedPassInput

log = logging.getLogger("dbi.worker")

# What a re-check does with a settled pass's input: None when it found what the pass
# found, else what it found instead (for the wake's reason and the log).
Check = Callable[[LoadedPassInput], str | None]
# Signal the workflow of this id.
Signal = Callable[[str, Wake], Awaitable[None]]
# At most this many re-checks run at once (each on a thread of the re-checks' own).
CONCURRENCY = 4
# A worker that starts asks every instance for an idle pass, spread over this long (the
# default healthCheckInterval), at most START_GAP_SECONDS apart (5 a second: a fleet
# under 1,500 is asked sooner, and a look a dead worker took with it waits seconds,
# not minutes): those that settle are re-checked here from then on.
START_SPREAD_SECONDS = 300.0
START_GAP_SECONDS = 0.2
# A worker that stops hands its settled instances on (``hand_off``) for at most this
# long, this many at once; it stays within the pod's terminationGracePeriodSeconds (60)
# after DBI_SHUTDOWN_SECONDS (45) for running activities.
HAND_OFF_SECONDS = 10.0
HAND_OFF_CONCURRENCY = 16
# A re-check loop that has not turned for this long, or a re-check that has run this
# long, is stuck (``Rechecks.stuck``): the worker's /livez fails and the kubelet
# restarts it, rather than its settled instances going unlooked-at until RECHECK_NET.
# A re-check's reads time out sooner (API requests 35 s, PostgreSQL statements 10 s),
# even the few an API server that stopped answering makes it wait on.
STUCK_SECONDS = 300.0


@dataclass
class _Settled:
    loaded: bytes  # the pass's input, as compact JSON
    check: Check
    every: float
    until: float
    order: int = 0  # its place in the schedule


class Rechecks:
    """The settled instances this worker re-checks, by workflow id, and the loop that
    re-checks each when due (``run``). ``settle`` and ``forget`` are called from activity
    threads."""

    def __init__(self, signal: Signal, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._signal = signal
        self._clock = clock
        self._lock = threading.Lock()
        self._settled: dict[str, _Settled] = {}
        self._due: list[tuple[float, int, str]] = []  # (when, order, workflow id)
        self._order = 0
        self._turned: float | None = None  # the loop's last turn; None: not running
        self._running: dict[int, tuple[str, float]] = {}  # on a thread: (id, since when)
        self._runs = itertools.count()

    def __len__(self) -> int:
        return len(self._settled)

    def settle(
        self,
        workflow_id: str,
        loaded: LoadedPassInput,
        check: Check,
        net: float,
        every: float | None = None,
    ) -> bool:
        """Re-check the instance of ``workflow_id`` as the settled pass ``loaded`` every
        ``every`` seconds (default: its healthCheckInterval), until its workflow's own
        pass, ``net`` seconds from now; False when no re-check would come before that
        pass (an interval that long)."""
        if every is None:
            every = loaded.expected.health_check_interval_seconds
        if not 0 < every <= net / 2:
            self.forget(workflow_id)
            return False
        now = self._clock()
        entry = _Settled(
            loaded=loaded.model_dump_json(exclude_defaults=True).encode(),
            check=check,
            every=every,
            until=now + net - every / 2,
        )
        with self._lock:
            self._settled[workflow_id] = entry
            entry.order = self._schedule(now + every, workflow_id)
        return True

    def forget(self, workflow_id: str) -> None:
        """Stop re-checking the instance of ``workflow_id``: its workflow runs a pass."""
        with self._lock:
            self._settled.pop(workflow_id, None)

    def due(self) -> list[tuple[str, _Settled]]:
        """Take the re-checks due now (each is scheduled again for its next interval)."""
        now = self._clock()
        taken = []
        with self._lock:
            while self._due and self._due[0][0] <= now:
                _, order, workflow_id = heapq.heappop(self._due)
                entry = self._settled.get(workflow_id)
                if entry is None or entry.order != order:
                    continue  # forgotten, or settled again since
                if now + entry.every > entry.until:
                    del self._settled[workflow_id]  # the workflow's own pass comes next
                else:
                    entry.order = self._schedule(now + entry.every, workflow_id)
                taken.append((workflow_id, entry))
        return taken

    async def run(self, executor: Executor, *, tick: float = 1.0) -> None:
        """Re-check what is due, every ``tick`` seconds, until cancelled."""
        loop = asyncio.get_running_loop()
        room = asyncio.Semaphore(CONCURRENCY)
        running: set[asyncio.Task[None]] = set()

        async def one(workflow_id: str, entry: _Settled) -> None:
            async with room:
                found = await loop.run_in_executor(executor, self._check, workflow_id, entry)
            if found is not None:
                await self._woken(workflow_id, found)

        try:
            while True:
                self._turned = self._clock()
                for workflow_id, entry in self.due():
                    task = asyncio.create_task(one(workflow_id, entry))
                    running.add(task)
                    task.add_done_callback(running.discard)
                await asyncio.sleep(tick)
        except asyncio.CancelledError:
            self._turned = None  # stopped, not stuck
            raise
        except Exception:  # left turned: stuck() says so once STUCK_SECONDS pass
            log.exception("the re-check loop stopped")
            raise
        finally:
            for task in running:
                task.cancel()

    def stuck(self, after: float = STUCK_SECONDS) -> str | None:
        """Why the re-checks are stuck, for /livez: the loop has not turned for ``after``
        seconds, or a re-check has run that long; None otherwise, and while the loop
        does not run (before it starts, after it is cancelled)."""
        now = self._clock()
        if self._turned is not None and now - self._turned > after:
            return f"the re-check loop has not turned for {now - self._turned:.0f}s"
        with self._lock:
            oldest = min(self._running.values(), key=lambda run: run[1], default=None)
        if oldest is not None and now - oldest[1] > after:
            return f"the re-check of {oldest[0]} has run for {now - oldest[1]:.0f}s"
        return None

    def _check(self, workflow_id: str, entry: _Settled) -> str | None:
        loaded = LoadedPassInput.model_validate_json(entry.loaded)
        run = next(self._runs)
        with self._lock:
            self._running[run] = (workflow_id, self._clock())
        try:
            found = entry.check(loaded)
        except Exception as e:  # the workflow's pass reports it as a step's error
            found = f"the re-check raised {type(e).__name__}"
        finally:
            with self._lock:
                del self._running[run]
        metrics.RECHECKS.labels("quiet" if found is None else "changed").inc()
        return found

    async def _woken(self, workflow_id: str, found: str) -> None:
        self.forget(workflow_id)
        log.info("re-check of %s: %s; waking its workflow", workflow_id, found)
        try:
            await self._signal(workflow_id, Wake(reason=f"re-check: {found}"))
        except Exception as e:  # its own pass, RECHECK_NET after the last, still comes
            log.warning("could not wake %s after its re-check: %s", workflow_id, e)

    async def start(
        self,
        listed: Callable[[], list[str] | None],
        spread: float = START_SPREAD_SECONDS,
        gap: float = START_GAP_SECONDS,
    ) -> None:
        """A worker that starts has settled nothing: ask the workflow of each instance
        ``listed`` (their workflow ids; None until the worker's views have listed them)
        for an idle pass now (``Wake.settle``), one after the other over ``spread``
        seconds, at most ``gap`` apart, so that the instances are looked at within an
        interval, as before, and those that settle are re-checked from then on. A Ready
        instance's workflow would otherwise wait up to RECHECK_NET for its own pass, and
        one waiting on a transition a dead worker was looking at up to AWAIT_NET."""
        while (ids := listed()) is None:
            await asyncio.sleep(1)
        gap = min(gap, spread / max(len(ids), 1))
        log.info("asking %d instances for a pass to settle them, %.2fs apart", len(ids), gap)
        asked = Wake(reason="a worker started: the health check's pass, now", settle=True)
        for workflow_id in ids:
            if workflow_id not in self._settled:
                try:
                    await self._signal(workflow_id, asked)
                except Exception as e:  # no workflow (yet): its first pass settles it
                    log.debug("could not ask %s for a pass: %s", workflow_id, e)
            await asyncio.sleep(gap)

    async def hand_off(self, within: float = HAND_OFF_SECONDS) -> tuple[int, int]:
        """A worker that stops hands its settled instances on: it asks each one's
        workflow for its health check's pass now (``Wake.settle``), which a worker still
        polling runs and settles, so their looks go on there instead of waiting up to
        RECHECK_NET for their own pass. Call it once this worker no longer polls. Gives
        up after ``within`` seconds; returns (handed on, settled here)."""
        with self._lock:
            ids = list(self._settled)
            self._settled.clear()
            self._due.clear()
        if not ids:
            return 0, 0
        log.info("handing %d settled instances on to the other workers", len(ids))
        asked = Wake(reason="a worker stopped: the health check's pass, now", settle=True)
        room = asyncio.Semaphore(HAND_OFF_CONCURRENCY)
        done = 0

        async def one(workflow_id: str) -> None:
            nonlocal done
            async with room:
                try:
                    await self._signal(workflow_id, asked)
                    done += 1
                except Exception as e:  # its own pass, RECHECK_NET after the last, comes
                    log.debug("could not hand %s on: %s", workflow_id, e)

        tasks = [asyncio.create_task(one(workflow_id)) for workflow_id in ids]
        _, late = await asyncio.wait(tasks, timeout=within)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        log.info(
            "handed %d of %d settled instances on; the rest wait for their own pass",
            done,
            len(ids),
        )
        return done, len(ids)

    def _schedule(self, when: float, workflow_id: str) -> int:
        self._order += 1
        heapq.heappush(self._due, (when, self._order, workflow_id))
        return self._order
