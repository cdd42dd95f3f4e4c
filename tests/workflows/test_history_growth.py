"""What idling does to a workflow's history, with the time-skipping server: an instance
that stays Ready at a 5-minute healthCheckInterval for weeks continues as new before
any run's history reaches the size at which the Temporal server starts warning, its
runs holding about ``RUN_EVENTS`` events each (the workflow's default limit).

``DBI_HISTORY_DAYS`` sets the simulated time (default 2, about a minute here; the
benchmarks page reports 30: ``DBI_HISTORY_DAYS=30 ./dev test
tests/workflows/test_history_growth.py -s``, about 2 minutes).
"""

from __future__ import annotations

import os
import time
from datetime import timedelta

from temporalio.testing import WorkflowEnvironment

from dbi.messages import RUN_EVENTS
from tests import history
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World
from workflows.state import PASS_EVENTS

# The Temporal server's defaults (dynamic config limit.historyCount.warn and
# limit.historySize.warn): past these it logs a warning for the workflow, and at five
# times these it terminates it.
SERVER_WARN_EVENTS = 10 * 1024
SERVER_WARN_BYTES = 10 * 1024 * 1024
DAYS = float(os.environ.get("DBI_HISTORY_DAYS", "2"))


async def test_weeks_of_idling_never_bring_a_history_near_the_servers_warning(
    time_env: WorkflowEnvironment,
) -> None:
    world = World(interval_seconds=300)
    async with running(time_env, world, history_limit=RUN_EVENTS) as handle:
        await settled(handle, 1)
        started = time.monotonic()
        for _ in range(int(DAYS * 24)):  # an hour at a time: one long skip times out
            await time_env.sleep(timedelta(hours=1))
        took = time.monotonic() - started
        runs = await _runs(time_env, handle.id)
    passes = len(world.reports)
    events = sum(count for count, _ in runs)
    print(  # the figures the benchmarks page reports (pytest -s)
        f"\n{DAYS:g} simulated days in {took:.0f} s: {passes} passes, {len(runs)} runs, "
        f"{events / passes:.1f} events and {sum(b for _, b in runs) / passes:.0f} bytes "
        f"per pass, {events / DAYS:.0f} events per day; the longest run "
        f"{max(c for c, _ in runs)} events, {max(b for _, b in runs)} bytes"
    )
    # At least every interval (and at most a tenth later): the month was idled through.
    assert passes >= DAYS * 86400 / (300 * 1.1)
    assert len(runs) >= 2, "the passes fit in one run: continue-as-new never ran"
    for count, size in runs:
        assert count < SERVER_WARN_EVENTS and size < SERVER_WARN_BYTES
    # A run counts what it adds (workflows.state.Tally): each holds RUN_EVENTS, within
    # a pass, when it continues as new.
    for count, _ in runs[:-1]:
        assert RUN_EVENTS - PASS_EVENTS <= count <= RUN_EVENTS + PASS_EVENTS, runs


async def test_a_run_begun_with_a_longer_limit_hands_on_the_shorter_one(
    time_env: WorkflowEnvironment,
) -> None:
    """A workflow begun before runs were limited to RUN_EVENTS (with 10,000; here twice
    RUN_EVENTS, to be quick) runs to its own limit once, and its next runs hold about
    RUN_EVENTS events: what a cached run costs the worker in memory grows with them."""
    world = World(interval_seconds=300)
    async with running(time_env, world, history_limit=2 * RUN_EVENTS) as handle:
        await settled(handle, 1)
        for _ in range(18):  # about 200 passes: the long run and at least one more
            await time_env.sleep(timedelta(hours=1))
        runs = await _runs(time_env, handle.id)
    assert len(runs) >= 3, runs
    # Each holds its limit, within a pass, when it continues as new.
    assert abs(runs[0][0] - 2 * RUN_EVENTS) <= PASS_EVENTS, runs
    assert abs(runs[1][0] - RUN_EVENTS) <= PASS_EVENTS, runs


async def _runs(env: WorkflowEnvironment, workflow_id: str) -> list[tuple[int, int]]:
    """(events, bytes) of each run of the workflow, the oldest first."""
    return [
        (len(h.events), sum(e.ByteSize() for e in h.events))
        for h in reversed(await history.runs(env.client, workflow_id))
    ]
