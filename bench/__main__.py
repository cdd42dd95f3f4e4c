"""Run the benchmark: ``python -m bench [--n 100] [--out bench-results]``.

Each engine runs on a fresh local stack of its own (control plane, VM stand-in with a
real PostgreSQL per VM, Temporal), so no run inherits another's VMs:

- **floor**: the VMs alone. N DBInstances (Stopped) get their Secrets and VMs from
  the credentials and vm steps' own code, untimed; then every VM is started at once,
  and the clock runs until the stand-in reports all of them ready.
- **temporal**: ``dbi worker`` and ``dbi watcher`` as processes (what ``dbi dev up`` runs).
- **peer**: ``python -m bench.peer``, the same steps under a classic work queue.

For each engine: **fleet** (N applied at once, until all Ready), **reaction** (patches
to Ready instances, until the status shows the new observedGeneration) and **idle**
(a window with nothing to do). Writes ``result.json``, ``result.md`` and
``ready.png`` to ``--out``, printing progress as it goes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from temporalio.client import Client

from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.steps import credentials, loop, vm
from bench import measure, own_passes, profile, report
from bench import peer as peer_module
from dbi import connect, names
from dbi.config import Config
from dbi.steps import StepInput
from devstack import tools
from devstack.orchestrator import install
from devstack.stack import LocalStack, StackInfo

NAMESPACE = "bench"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def manifest(name: str, interval: str, power: str = "Running") -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "version": 18,
            "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
            "healthCheckInterval": interval,
            "powerState": power,
        },
    }


def create_all(api: k8s.ApiClient, bodies: list[dict[str, Any]]) -> None:
    objects = k8s.CustomObjectsApi(api)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(
            pool.map(
                lambda body: objects.create_namespaced_custom_object(
                    names.GROUP, names.VERSION, NAMESPACE, names.PLURAL, body
                ),
                bodies,
            )
        )


REACTION_LIMIT = 60.0  # s: a patch not seen by then counts as missed, and the run goes on


def wait_for(
    tracker: measure.Tracker, keys: set[Any], what: str, timeout: float, *, required: bool = True
) -> bool:
    """Wait until every key is seen; past ``timeout``, stop the run (or, unless
    ``required``, say so and return False)."""
    deadline = time.monotonic() + timeout
    last = 0.0
    while (done := tracker.count(keys)) < len(keys):
        if time.monotonic() > deadline:
            message = f"bench: {what}: only {done}/{len(keys)} within {timeout:.0f}s"
            if required:
                raise SystemExit(message)
            say(message)
            return False
        if time.monotonic() - last >= 2:
            say(f"  {what}: {done}/{len(keys)}")
            last = time.monotonic()
        time.sleep(0.05)
    return True


def floor(args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    say(f"floor: {args.n} VMs booted by the stand-in alone")
    with LocalStack(state_dir=state_dir) as info:
        api = connect.kubernetes(info.kubeconfig)
        install(api)
        k8s.CoreV1Api(api).create_namespace(
            k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE))
        )
        names_ = [f"db{i:03d}" for i in range(args.n)]
        create_all(api, [manifest(n, args.interval, power="Stopped") for n in names_])
        ctx = Context(kube=Kube(api), config=Config.from_env())
        objects = k8s.CustomObjectsApi(api)

        def prepare(name: str) -> None:
            body: dict[str, Any] = objects.get_namespaced_custom_object(  # type: ignore[assignment]
                names.GROUP, names.VERSION, NAMESPACE, names.PLURAL, name
            )
            step_input = StepInput(namespace=NAMESPACE, name=name, uid=body["metadata"]["uid"])
            loop.run(ctx, credentials.STEP, step_input)
            loop.run(ctx, vm.STEP, step_input)

        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(prepare, names_))
        tracker = measure.Tracker(api, measure.vms(api, NAMESPACE), measure.vm_ready)
        served = measure.APIWindow(api)
        cpu = measure.CPUWindow({**info.pids, "bench": os.getpid()})
        started = time.monotonic()

        def start(name: str) -> None:
            objects.patch_namespaced_custom_object(
                "kubevirt.io",
                "v1",
                NAMESPACE,
                "virtualmachines",
                name,
                {"spec": {"runStrategy": "Always"}},
            )

        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(start, names_))
        wait_for(tracker, set(names_), "VMs ready", args.timeout)
        elapsed = max(tracker.first[n] for n in names_) - started
        cpu_used = cpu.used()
        requests, traffic = served.used()
        tracker.stop.set()
        return {
            "total_seconds": elapsed,
            "ready_at": sorted(tracker.first[n] - started for n in names_),
            "api_requests_per_instance": requests / args.n,
            "cpu_seconds_by_part": cpu_used,
            "api_traffic": traffic,
        }


STUB_WORKER = "bench.stubworker"  # --steps stub: the worker with its steps stubbed


def engine(name: str, args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    say(
        f"{name}: fleet of {args.n} ({args.steps} steps), reaction over {args.reaction}, "
        f"idle {args.idle}s"
    )
    stubbed = args.steps == "stub"
    with LocalStack(
        state_dir=state_dir,
        orchestrator=name == "temporal",
        worker_module=STUB_WORKER if stubbed else "workflows.worker",
    ) as info:
        api = connect.kubernetes(info.kubeconfig)
        peer = None
        parts = {**info.pids, "bench": os.getpid()}  # whose CPU is counted
        if name == "temporal":
            metrics_url = info.metrics["worker"]
        else:
            install(api)
            port = tools.free_port()
            log = (state_dir / "peer.log").open("ab")
            peer = subprocess.Popen(
                [sys.executable, "-m", "bench.peer"],
                env={
                    **os.environ,
                    "KUBECONFIG": info.kubeconfig,
                    "DBI_WATCH_NAMESPACES": NAMESPACE,
                    "DBI_METRICS_PORT": str(port),
                    peer_module.STEPS_VARIABLE: args.steps,
                },
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            parts["peer"], metrics_url = peer.pid, f"http://127.0.0.1:{port}/metrics"
        try:
            return _measure(name, args, info, api, metrics_url, parts)
        finally:
            if peer is not None:
                peer.terminate()
                peer.wait(timeout=30)


def _measure(
    engine_name: str,
    args: argparse.Namespace,
    info: StackInfo,
    api: k8s.ApiClient,
    metrics_url: str,
    parts: dict[str, int],
) -> dict[str, Any]:
    """Measure one engine's fleet, reaction and idle; ``parts`` names the processes whose
    CPU is counted, the orchestrator's (``worker`` or ``peer``) among them."""
    pid = parts[orchestrator(engine_name)]
    k8s.CoreV1Api(api).create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
    with (
        measure.Tracker(api, measure.instances(api, NAMESPACE), measure.converged) as tracker,
        measure.Tracker(api, measure.vms(api, NAMESPACE), measure.vm_stages) as vms,
    ):
        measure.scrape(_wait_for_endpoint(metrics_url))
        instances = [f"db{i:03d}" for i in range(args.n)]
        # The stack's own traffic (controller manager, stand-in, leases) is subtracted below.
        background = _background_rate(api)
        cpu_before = measure.cpu_seconds(pid)
        served = measure.APIWindow(api)
        before = measure.scrape(metrics_url)
        cpu = measure.CPUWindow(parts)
        started = time.monotonic()
        create_all(api, [manifest(n, args.interval) for n in instances])
        applied = time.monotonic()
        wait_for(tracker, {(n, 1) for n in instances}, "Ready", args.timeout)
        cpu_used = cpu.used()
        requests, traffic = served.used()
        ready = sorted(tracker.first[(n, 1)] - started for n in instances)
        after = measure.scrape(metrics_url)
        fleet = {
            "total_seconds": ready[-1],
            "apply_seconds": applied - started,
            "ready_at": ready,
            "apply_to_ready_p50": measure.percentile(ready, 0.5),
            "apply_to_ready_p99": measure.percentile(ready, 0.99),
            "activities_per_instance": (
                measure.total(after, "dbi_step_duration_seconds_count")
                - measure.total(before, "dbi_step_duration_seconds_count")
            )
            / args.n,
            "api_requests_per_instance": (requests - background * ready[-1]) / args.n,
            "cpu_seconds": measure.cpu_seconds(pid) - cpu_before,
            # CPU per instance: the engine's processes (worker, watcher and Temporal
            # server, or the peer) and the worker (or peer) alone.
            "engine_cpu_seconds_per_instance": engine_cpu(engine_name, cpu_used) / args.n,
            "orchestrator_cpu_seconds_per_instance": cpu_used[orchestrator(engine_name)] / args.n,
            "peak_rss_mib": measure.peak_rss_mib(pid),
            "cpu_seconds_by_part": cpu_used,
            "api_traffic": traffic,  # requests and watch events, gross
            "stages": _stages(instances, started, tracker.first, vms.first),
        }
        if engine_name == "temporal":
            events, seconds = _histories(info, args.n)
            fleet["history_events_per_instance"] = events
            fleet["time_per_instance"] = seconds

        say(f"{engine_name}: reaction")
        reaction = _reaction(api, tracker, instances[: args.reaction], args.interval)

        if args.settle:
            say(f"{engine_name}: settling for {args.settle:g}s before the idle window")
            time.sleep(args.settle)
        say(f"{engine_name}: idle for {args.idle}s")
        lengths = _history_lengths(info) if engine_name == "temporal" else {}
        with own_passes.OwnPasses(
            info.temporal_address,
            own_passes.oldest_first(NAMESPACE, instances, tracker.first, args.reaction),
            own_passes.rate(args.n) if args.own_passes and engine_name == "temporal" else 0,
        ) as asked:
            idle = _idle(engine_name, api, metrics_url, parts, args, background)
        idle["own_passes_asked"] = asked.asked
        idle["own_passes_failed"] = asked.failed
        if lengths:
            say(f"{engine_name}: reading {len(lengths)} histories' growth")
            idle["history_events_per_instance_day"] = _history_growth(
                info, lengths, idle["seconds"]
            )
        say(f"{engine_name}: stopping its stack")
        return {"fleet": fleet, "reaction": reaction, "idle": idle}


# Each engine's processes; the first runs the steps (the worker, or the peer).
ENGINE_PARTS = {"temporal": ("worker", "watcher", "temporal"), "peer": ("peer",)}


def orchestrator(engine_name: str) -> str:
    """The process that runs the steps: the worker, or the peer."""
    return ENGINE_PARTS[engine_name][0]


def engine_cpu(engine_name: str, used: dict[str, float]) -> float:
    """CPU seconds of the engine's processes (the Temporal server counts for temporal)."""
    return sum(used.get(part, 0.0) for part in ENGINE_PARTS[engine_name])


def _idle(
    engine_name: str,
    api: k8s.ApiClient,
    metrics_url: str,
    parts: dict[str, int],
    args: argparse.Namespace,
    background: float,
) -> dict[str, Any]:
    """A window with nothing to do: what the engine (and the stack) does meanwhile."""
    before = measure.scrape(metrics_url)
    served = measure.APIWindow(api)
    cpu = measure.CPUWindow(parts)
    slots = 0.0
    end = time.monotonic() + args.idle
    while time.monotonic() < end:
        samples = measure.scrape(metrics_url)
        slots = max(slots, _activity_slots_used(samples))
        time.sleep(SLOTS_SAMPLED_EVERY)
    after = measure.scrape(metrics_url)
    cpu_used = cpu.used()
    requests, traffic = served.used()
    requests -= background * args.idle
    minutes = args.idle / 60
    per = args.n * minutes
    passes = measure.total(after, "dbi_passes_total") - measure.total(before, "dbi_passes_total")
    # The worker's re-checks of settled instances (activities.worker.rechecks): a look each, as
    # a pass is, that goes through no workflow.
    rechecks = measure.total(after, "dbi_rechecks_total") - measure.total(
        before, "dbi_rechecks_total"
    )
    looks = passes + rechecks
    return {
        "seconds": args.idle,
        "settled_seconds": args.settle,  # waited before the window
        "passes_per_instance_minute": passes / per,
        "rechecks_per_instance_minute": rechecks / per,
        "activities_per_instance_minute": (
            measure.total(after, "dbi_step_duration_seconds_count")
            - measure.total(before, "dbi_step_duration_seconds_count")
        )
        / per,
        "api_requests_per_instance_minute": requests / per,
        # Per look at an instance: a pass or a re-check.
        "api_requests_per_pass": requests / looks if looks else 0.0,
        "max_activity_slots_used": slots,
        "cpu_seconds_by_part_per_minute": {
            part: seconds / minutes for part, seconds in cpu_used.items()
        },
        "engine_cpu_seconds_per_instance_minute": engine_cpu(engine_name, cpu_used) / per,
        # What the engine's processes keep busy, as a share of one core.
        "engine_cpu_share_of_one_core": engine_cpu(engine_name, cpu_used) / args.idle,
        "orchestrator_rss_mib": measure.rss_mib(parts[orchestrator(engine_name)]),
        # The worker's workflow cache (Temporal SDK metrics): hits, misses, evictions.
        # Counters over the window; the size (a gauge) as it ends.
        "workflow_cache": {
            name: measure.total(after, name)
            - (0 if "size" in name else measure.total(before, name))
            for name in sorted({name for name, _ in after if "sticky_cache" in name})
        },
        # Gross (the stack's background included), per look: which reads a look makes.
        "api_traffic_per_pass": {k: v / looks for k, v in traffic.items()} if looks else {},
    }


def _reaction(
    api: k8s.ApiClient, tracker: measure.Tracker, instances: list[str], interval: str
) -> dict[str, Any]:
    """Patch each instance in turn; time until its status shows the new generation."""
    objects = k8s.CustomObjectsApi(api)
    latencies = []
    missed = 0
    for i, name in enumerate(instances):
        patched = time.monotonic()
        objects.patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            NAMESPACE,
            names.PLURAL,
            name,
            {"spec": {"healthCheckInterval": f"{int(interval.rstrip('s')) + 1}s"}},
        )
        if wait_for(tracker, {(name, 2)}, f"reaction {i + 1}", REACTION_LIMIT, required=False):
            latencies.append(tracker.first[(name, 2)] - patched)
        else:
            missed += 1
            latencies.append(REACTION_LIMIT)  # at least this: it weighs in the percentiles
        time.sleep(0.2)
    return {
        "patches": len(latencies),
        "missed": missed,
        "p50": measure.percentile(latencies, 0.5),
        "p99": measure.percentile(latencies, 0.99),
        "seconds": latencies,  # each patch's, in order
    }


def _stages(
    instances: list[str], started: float, ready: dict[Any, float], vms: dict[Any, float]
) -> dict[str, float]:
    """Where each instance's apply-to-Ready time went, p50 and p99 of each stage: until
    its VM exists (the steps before the VM), its VM's boot (the stand-in: initdb and
    PostgreSQL's start) and after the boot (until the status says Ready)."""
    spans: dict[str, list[float]] = {"to_vm": [], "boot": [], "after_boot": []}
    for name in instances:
        created, booted = vms.get(("created", name)), vms.get(("ready", name))
        if created is None or booted is None:
            continue  # not seen by the watch (it reconnected): left out
        spans["to_vm"].append(created - started)
        spans["boot"].append(booted - created)
        spans["after_boot"].append(ready[(name, 1)] - booted)
    stages = {"instances": float(len(spans["to_vm"]))}
    for stage, values in spans.items():
        stages[f"{stage}_p50"] = measure.percentile(values, 0.5)
        stages[f"{stage}_p99"] = measure.percentile(values, 0.99)
    return stages


def _background_rate(api: k8s.ApiClient, seconds: float = 5.0) -> float:
    """API requests per second while no instance exists."""
    before = measure.apiserver_requests(api)
    time.sleep(seconds)
    return (measure.apiserver_requests(api) - before - 1) / seconds  # minus this scrape


def _wait_for_endpoint(url: str) -> str:
    deadline = time.monotonic() + 60
    while True:
        try:
            measure.scrape(url)
            return url
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


ACTIVITY_WORKERS = {"ActivityWorker", "LocalActivityWorker"}  # a pass's steps run locally
# How often the idle window samples the slots in use (a scrape of the orchestrator's
# metrics). The worker's page is about 190 KB (the SDK's metrics), the peer's a few:
# scraped each second, rendering it took 5 % of the worker's samples in a py-spy
# profile of a stubbed run, a cost the peer hardly had.
SLOTS_SAMPLED_EVERY = 10.0


def _activity_slots_used(samples: measure.Samples) -> float:
    return sum(
        value
        for (name, labels), value in samples.items()
        if "slots_used" in name and dict(labels).get("worker_type") in ACTIVITY_WORKERS
    )


HISTORY_SAMPLE = 200  # workflows whose histories are read (all of them below that)


async def _sampled_ids(client: Client) -> list[str]:
    """At most HISTORY_SAMPLE of the bench's workflows, spread evenly over their ids."""
    ids = sorted([e.id async for e in client.list_workflows(f"DbiNamespace='{NAMESPACE}'")])
    return ids[:: max(1, len(ids) // HISTORY_SAMPLE)][:HISTORY_SAMPLE]


def _histories(info: StackInfo, n: int) -> tuple[float, dict[str, float]]:
    """History events per instance, and where the workflows' time went (bench.profile),
    from a sample of the workflows at large N."""

    async def read() -> tuple[float, dict[str, float]]:
        client = await connect.temporal(info.temporal_address)
        sample = await _sampled_ids(client)
        events = 0
        breakdown = profile.Breakdown()
        for workflow_id in sample:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
            events += len(history.events)
            breakdown.add(history.events)
        return events / max(1, len(sample)), breakdown.per(max(1, len(sample)))

    return asyncio.run(read())


def _history_lengths(info: StackInfo, ids: list[str] | None = None) -> dict[str, tuple[str, int]]:
    """The current run and history length of each of ``ids`` (default: a sample)."""

    async def read() -> dict[str, tuple[str, int]]:
        client = await connect.temporal(info.temporal_address)
        found = {}
        for workflow_id in ids if ids is not None else await _sampled_ids(client):
            described = await client.get_workflow_handle(workflow_id).describe()
            found[workflow_id] = (described.run_id, described.history_length)
        return found

    return asyncio.run(read())


def _history_growth(info: StackInfo, before: dict[str, tuple[str, int]], seconds: float) -> float:
    """History events a workflow gains per day of idling, from the sample's growth over
    the idle window (a workflow that continued as new meanwhile is left out)."""
    after = _history_lengths(info, list(before))
    grown = [
        after[w][1] - before[w][1] for w in before if w in after and after[w][0] == before[w][0]
    ]
    return sum(grown) / len(grown) * 86400 / seconds if grown else 0.0


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line, checked; ``engines`` becomes the list of engines to run."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100, help="instances per fleet (default 100)")
    parser.add_argument("--reaction", type=int, default=20, help="patches timed (default 20)")
    parser.add_argument("--idle", type=float, default=60, help="idle window, s (default 60)")
    parser.add_argument(
        "--settle",
        type=float,
        default=0,
        help="wait this long after the reaction before the idle window, s, so that the "
        "window sees the steady state: every instance's health check already settled "
        "(default 0)",
    )
    parser.add_argument(
        "--own-passes",
        action="store_true",
        help="temporal: in the idle window, ask settled instances for their own pass at the "
        "steady state's rate, N per six hours (bench.own_passes), the instances passed "
        "longest ago first; without it the window holds none of them",
    )
    parser.add_argument("--interval", default="30s", help="healthCheckInterval (default 30s)")
    parser.add_argument("--timeout", type=float, default=900, help="per phase, s (default 900)")
    parser.add_argument(
        "--engines",
        default=None,
        help="which to run (default floor,temporal,peer; with --steps stub temporal,peer)",
    )
    parser.add_argument(
        "--steps",
        choices=("real", "stub"),
        default="real",
        help="real: the steps drive VMs with PostgreSQL; stub: every converge step answers "
        "as a settled instance's would (bench.stubs), so the engine alone is measured",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the engines this many times, interleaved (temporal, peer, temporal, ...), "
        "and report each figure's median and spread (default 1)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results"), help="output dir")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error("--n must be at least 1")
    if args.reaction > args.n:
        parser.error("--reaction cannot exceed --n")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.settle < 0:
        parser.error("--settle: seconds, at least 0")
    if not re.fullmatch(r"[1-9][0-9]*s", args.interval):
        parser.error("--interval: whole seconds, such as 30s or 300s")
    default = "temporal,peer" if args.steps == "stub" else "floor,temporal,peer"
    chosen = [e.strip() for e in (args.engines or default).split(",") if e.strip()]
    unknown = set(chosen) - {"floor", "temporal", "peer"}
    if unknown:
        parser.error(f"--engines: unknown {', '.join(sorted(unknown))}")
    if not chosen:
        parser.error("--engines: name at least one of floor, temporal, peer")
    if args.idle < int(args.interval[:-1]):
        say(
            f"bench: the idle window ({args.idle:g}s) is shorter than the interval "
            f"({args.interval}): some instances may not pass in it"
        )
    if args.steps == "stub" and "floor" in chosen:
        parser.error("--engines: floor boots VMs; with --steps stub there are none")
    args.engines = chosen
    return args


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (``timeout``, a CI job cancelled) stops the stack and removes its data as
    # Ctrl-C does: without this, Python exits at once and leaves gigabytes in /tmp.
    signal.signal(signal.SIGTERM, _interrupted)
    args = arguments(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "n": args.n,
        "interval": args.interval,
        "steps": args.steps,
        "repeat": args.repeat,
    }
    # Interleaved: a slow spell of the machine falls on both engines, not on one.
    order = [(run, name) for run in range(args.repeat) for name in args.engines]
    with tempfile.TemporaryDirectory(prefix="dbi-bench-") as tmp:
        root = Path(tmp)
        for run, name in order:
            if name == "floor" and run:
                continue  # the VMs alone: once is enough
            state_dir = root / f"{name}-{run + 1}"
            data = floor(args, state_dir) if name == "floor" else engine(name, args, state_dir)
            if not run:
                results[name] = data
            if name != "floor":
                results.setdefault("runs", {}).setdefault(name, []).append(summary(data))
            table = write(results, args.out)  # what is measured is kept, whatever follows
            say(f"{name} (run {run + 1} of {args.repeat}): done; removing its stack's data")
            shutil.rmtree(state_dir, ignore_errors=True)
    print(table)
    say(f"wrote {args.out}/result.json, result.md and ready.png")
    return 0


def summary(data: dict[str, Any]) -> dict[str, float]:
    """The figures of one engine's run that repeated runs report as medians (report.RUNS)."""
    found = {}
    for section, key, _ in report.RUNS:
        value = (data.get(section) or {}).get(key)
        if value is not None:
            found[f"{section}.{key}"] = float(value)
    return found


def write(results: dict[str, Any], out: Path) -> str:
    """Write result.json, result.md and ready.png for the engines measured so far."""
    (out / "result.json").write_text(json.dumps(results, indent=2) + "\n")
    table = report.markdown(results)
    (out / "result.md").write_text(table)
    report.plot(results, out / "ready.png")
    return table


if __name__ == "__main__":
    sys.exit(main())
