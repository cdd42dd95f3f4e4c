"""What a cached workflow costs the worker in memory as its run grows:
``python -m bench.run_memory [--n 100] [--passes 60] [--limits 10000,300]``.

For each history limit, one worker (unsandboxed, as ``dbi worker`` runs) in this
process serves ``--n`` DBInstance workflows with stubbed steps on Temporal's
time-skipping test server; time is skipped one ``healthCheckInterval`` (5 minutes)
at a time, so each instance idles through ``--passes`` passes. After every 5 passes
it prints the process's RSS over what it was before the workflows started, per
workflow. A run that reaches its limit continues as new and gives its memory back.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import subprocess
import sys
import uuid
from datetime import timedelta

from dbi.messages import WorkflowInput
from tests.workflows.conftest import start_time_skipping
from tests.workflows.stubs import World, activities
from workflows.dbinstance import DBInstanceWorkflow
from workflows.worker import Tuning, build_worker

INTERVAL_SECONDS = 300  # healthCheckInterval
SKIP = timedelta(seconds=INTERVAL_SECONDS * 1.1)  # the interval and its largest spread
EVERY = 5  # passes between two readings


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure(n: int, passes: int, limit: int) -> list[tuple[int, float]]:
    """Return (passes, KiB per workflow over the worker before them) every EVERY passes."""
    env = await start_time_skipping()
    try:
        world = World(interval_seconds=INTERVAL_SECONDS)
        world.clock = env.get_current_time
        queue = f"memory-{uuid.uuid4()}"
        readings = []
        tuning = Tuning(cached_workflows=n + 100)
        async with build_worker(env.client, activities(world), task_queue=queue, tuning=tuning):
            gc.collect()
            before = rss_mib()
            for _ in range(n):
                name = f"db-{uuid.uuid4().hex[:8]}"
                await env.client.start_workflow(
                    DBInstanceWorkflow.run,
                    WorkflowInput(namespace="team-a", name=name, history_limit=limit),
                    id=f"dbinstance/team-a/{name}",
                    task_queue=queue,
                )
            for done in range(EVERY, passes + 1, EVERY):
                for _ in range(EVERY):
                    await env.sleep(SKIP)
                    await asyncio.sleep(n / 100)  # the passes the skip released
                world.calls.clear()  # the stubs' own records
                world.inputs.clear()
                world.reports.clear()
                gc.collect()
                per = (rss_mib() - before) / n * 1024
                readings.append((done, per))
                print(f"  limit {limit}: {done} passes, {per:.0f} KiB per workflow", flush=True)
        return readings
    finally:
        await env.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run_memory", description=__doc__)
    parser.add_argument("--n", type=int, default=100, help="workflows (default 100)")
    parser.add_argument("--passes", type=int, default=60, help="passes each (default 60)")
    parser.add_argument("--limits", default="10000,300", help="history limits to compare")
    args = parser.parse_args(argv)
    try:
        limits = [int(x) for x in args.limits.split(",") if x.strip()]
    except ValueError:
        parser.error("--limits: whole numbers, comma-separated, such as 10000,300")
    if args.n < 1 or args.passes < EVERY or not limits or min(limits) < 50:
        parser.error(f"--n at least 1, --passes at least {EVERY}, each limit at least 50")
    if len(limits) > 1:  # one process each: memory one gave back skews the next
        command = [sys.executable, "-m", "bench.run_memory", f"--n={args.n}"]
        command.append(f"--passes={args.passes}")
        codes = [
            subprocess.run([*command, f"--limits={limit}"], check=False).returncode
            for limit in limits
        ]
        return max(codes)
    (limit,) = limits
    print(f"history limit {limit}: {args.n} workflows, {args.passes} passes", flush=True)
    readings = asyncio.run(measure(args.n, args.passes, limit))
    last = readings[-1][1]
    growth = (last - readings[0][1]) / max(1, readings[-1][0] - readings[0][0])
    print(
        f"limit {limit}: {last:.0f} KiB per workflow after {readings[-1][0]} passes, "
        f"{growth:.1f} KiB more per pass from the first reading"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
