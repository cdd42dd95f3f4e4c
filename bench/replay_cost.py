"""What a workflow that is not cached costs the worker at its next task, by its run's
length: ``python -m bench.replay_cost [--passes 45] [--repeat 7]``.

A worker whose workflow cache does not hold an instance's workflow replays the run's
whole history before it runs the new task: at 10,000 instances with a cache of 3,000,
most of a settled instance's own passes (every ``RECHECK_NET``) begin so. This makes
one run of ``--passes`` idle passes with stubbed steps on Temporal's time-skipping test
server, then replays its history cut after 1, 2, 5, 10, ... passes with the SDK's
``Replayer`` (unsandboxed, as ``dbi worker`` runs workflows), ``--repeat`` times each,
and prints the median CPU-seconds of this process per replay, and the cost per event.
The Replayer starts a worker for each replay, so its fixed part is above a real
worker's; the cost per event is the figure to use.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import timedelta

from temporalio.client import WorkflowHistory

from tests.workflows import definitions
from tests.workflows.conftest import running, settled, start_time_skipping
from tests.workflows.stubs import World

INTERVAL_SECONDS = 300  # healthCheckInterval
CUTS = (1, 2, 5, 10, 20, 30, 45, 60)  # passes before each cut


async def one_run(passes: int) -> WorkflowHistory:
    """The history of one run of ``passes`` idle passes (it never continues as new)."""
    env = await start_time_skipping()
    try:
        world = World(interval_seconds=INTERVAL_SECONDS)
        async with running(env, world, history_limit=100_000) as handle:
            await settled(handle, 1)
            while len(world.reports) < passes:
                await env.sleep(timedelta(seconds=INTERVAL_SECONDS * 1.1))
            await settled(handle, passes)
            return await handle.fetch_history()
    finally:
        await env.shutdown()


async def measure(passes: int, repeat: int) -> list[tuple[int, float]]:
    """Return (events replayed, median CPU-seconds a replay) for each cut."""
    history = await one_run(passes)
    events = list(history.events)
    ends = [i + 1 for i, e in enumerate(events) if e.HasField("timer_started_event_attributes")]
    replayer = definitions.replayer(sandboxed=False)  # as the worker runs it
    found = []
    for cut in (ends[k - 1] for k in CUTS if k <= len(ends)):
        part = WorkflowHistory(history.workflow_id, events[:cut])
        await replayer.replay_workflow(part)  # the first replay imports and warms
        took = []
        for _ in range(repeat):
            began = time.process_time()
            await replayer.replay_workflow(part)
            took.append(time.process_time() - began)
        found.append((cut, statistics.median(took)))
        print(f"  {cut} events: {found[-1][1] * 1000:.1f} ms a replay", flush=True)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay_cost", description=__doc__)
    parser.add_argument("--passes", type=int, default=45, help="passes in the run (default 45)")
    parser.add_argument("--repeat", type=int, default=7, help="replays per cut (default 7)")
    args = parser.parse_args(argv)
    if args.passes < 2 or args.repeat < 1:
        parser.error("--passes at least 2, --repeat at least 1")
    print(f"one run of {args.passes} idle passes, each cut replayed {args.repeat} times")
    found = asyncio.run(measure(args.passes, args.repeat))
    (first, low), (last, high) = found[0], found[-1]
    per_event = (high - low) / (last - first)
    print(
        f"{per_event * 1000:.2f} ms of CPU per event replayed ({first} to {last} events: "
        f"{low * 1000:.1f} to {high * 1000:.1f} ms a replay)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
