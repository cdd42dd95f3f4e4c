"""The benchmark's Markdown table (figures side by side, with ratios) and its plot."""

from __future__ import annotations

from pathlib import Path
from statistics import median
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: write files only
import matplotlib.pyplot as plt

from bench import profile

ROWS = [
    ("fleet", "total_seconds", "Fleet: all Ready (s)"),
    ("fleet", "apply_to_ready_p50", "Fleet: apply to Ready p50 (s)"),
    ("fleet", "apply_to_ready_p99", "Fleet: apply to Ready p99 (s)"),
    ("fleet", "activities_per_instance", "Fleet: activities per instance"),
    ("fleet", "api_requests_per_instance", "Fleet: API requests per instance (net of background)"),
    ("fleet", "history_events_per_instance", "Fleet: history events per instance"),
    ("fleet", "cpu_seconds", "Fleet: orchestrator CPU (s)"),
    (
        "fleet",
        "engine_cpu_seconds_per_instance",
        "Fleet: engine CPU per instance (s; worker, watcher and Temporal server, or peer)",
    ),
    (
        "fleet",
        "orchestrator_cpu_seconds_per_instance",
        "Fleet: worker (or peer) CPU per instance (s)",
    ),
    ("fleet", "peak_rss_mib", "Fleet: orchestrator peak RSS (MiB)"),
    ("reaction", "p50", "Reaction: patch to observedGeneration p50 (s)"),
    ("reaction", "p99", "Reaction: patch to observedGeneration p99 (s)"),
    ("reaction", "missed", "Reaction: patches not seen within 60 s (counted as 60 s above)"),
    ("idle", "passes_per_instance_minute", "Idle: passes per instance per minute"),
    ("idle", "rechecks_per_instance_minute", "Idle: worker's re-checks per instance per minute"),
    ("idle", "own_passes_asked", "Idle: own passes asked (--own-passes), in the window"),
    ("idle", "activities_per_instance_minute", "Idle: activities per instance per minute"),
    (
        "idle",
        "api_requests_per_instance_minute",
        "Idle: API requests per instance per minute (net)",
    ),
    ("idle", "api_requests_per_pass", "Idle: API requests per pass or re-check (net)"),
    ("idle", "max_activity_slots_used", "Idle: most activity slots in use (regular and local)"),
    (
        "idle",
        "engine_cpu_seconds_per_instance_minute",
        "Idle: engine CPU per instance per minute (s)",
    ),
    ("idle", "engine_cpu_share_of_one_core", "Idle: engine CPU, share of one core"),
    ("idle", "orchestrator_rss_mib", "Idle: worker (or peer) RSS (MiB)"),
    ("idle", "history_events_per_instance_day", "Idle: history events per instance per day"),
]

# The figures repeated runs report as medians with their spread: CPU first, as the
# steadiest on a shared machine.
RUNS = [
    row
    for row in ROWS
    if row[1]
    in {
        "engine_cpu_seconds_per_instance",
        "orchestrator_cpu_seconds_per_instance",
        "engine_cpu_seconds_per_instance_minute",
        "total_seconds",
        "p50",
        "p99",
        "api_requests_per_pass",
    }
]


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}"


def _ratio(a: Any, b: Any) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def markdown(results: dict[str, Any]) -> str:
    """Return the table: one row per figure, engines side by side, ratios of temporal."""
    temporal, peer = results.get("temporal") or {}, results.get("peer") or {}
    steps = results.get("steps", "real")
    lines = [
        f"N = {results['n']}, healthCheckInterval {results['interval']}, {steps} steps",
        "",
        "| Figure | temporal | peer | temporal / peer |",
        "|---|---|---|---|",
    ]
    for section, key, label in ROWS:
        a = (temporal.get(section) or {}).get(key)
        b = (peer.get(section) or {}).get(key)
        if a is None and b is None:
            continue
        lines.append(f"| {label} | {_figure(a)} | {_figure(b)} | {_ratio(a, b)} |")
    if floor := results.get("floor"):
        lines += [
            "",
            f"Floor (the stand-in alone boots {results['n']} VMs): "
            f"{floor['total_seconds']:.3g} s, {floor['api_requests_per_instance']:.3g} API "
            "requests per instance.",
        ]
        for name, data in (("temporal", temporal), ("peer", peer)):
            if data:
                total = data["fleet"]["total_seconds"]
                lines.append(f"- {name} fleet / floor: {_ratio(total, floor['total_seconds'])}")
    lines += _medians(results)
    lines += _cache(results)
    lines += _stages(results)
    lines += _cpu(results)
    lines += _traffic(results)
    lines += _idle_cpu(results)
    if seconds := (temporal.get("fleet") or {}).get("time_per_instance"):
        lines += [
            "",
            "Where the temporal engine's fleet time went, per instance (from the histories; "
            f"{seconds['activities']:.3g} activities, {seconds.get('local_activities', 0):.3g} "
            f"of them local, and {seconds['workflow_tasks']:.3g} "
            "workflow tasks each, besides "
            f"{seconds.get('workflow_tasks_lost', 0):.3g} that timed out or failed; a local "
            "activity runs inside its workflow task):",
            "",
            "| activity queued | activity ran | workflow task queued | workflow task ran |",
            "|---|---|---|---|",
            "| " + " | ".join(f"{seconds[part]:.3g} s" for part in profile.PARTS) + " |",
            "",
            "What brought those workflow tasks, per instance: "
            + ", ".join(
                f"{cause} {seconds.get(f'woken_by_{cause}', 0):.3g}" for cause in profile.CAUSES
            )
            + ". The watcher's wakes, per instance, by what they were for: "
            + _counted(seconds, "wake: ")
            + ". The timers that fired, per instance, by what their wait was for: "
            + _counted(seconds, "timer: ")
            + ".",
        ]
    return "\n".join(lines) + "\n"


def _counted(seconds: dict[str, float], prefix: str) -> str:
    """The figures under ``prefix`` (``profile.Breakdown.per``), by what they counted."""
    found = [
        f"{key.removeprefix(prefix) or 'unnamed'} {value:.3g}"
        for key, value in seconds.items()
        if key.startswith(prefix)
    ]
    return ", ".join(found) or "none"


def _medians(results: dict[str, Any]) -> list[str]:
    """Repeated, interleaved runs: each figure's median (min to max) per engine, and the
    ratio of the medians."""
    runs = results.get("runs") or {}
    if max((len(r) for r in runs.values()), default=0) < 2:
        return []
    engines = [name for name in ("temporal", "peer") if runs.get(name)]
    lines = [
        "",
        f"Medians of {results.get('repeat')} interleaved runs per engine (min to max):",
        "",
        "| Figure | " + " | ".join(engines) + " | temporal / peer |",
        "|---|" + "---|" * (len(engines) + 1),
    ]
    for section, key, label in RUNS:
        name = f"{section}.{key}"
        medians: dict[str, float] = {}
        cells = []
        for engine in engines:
            values = [r[name] for r in runs[engine] if name in r]
            if not values:
                cells.append("-")
                continue
            medians[engine] = median(values)
            cells.append(
                f"{_figure(medians[engine])} ({_figure(min(values))} to {_figure(max(values))})"
            )
        ratio = _ratio(medians.get("temporal"), medians.get("peer"))
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {ratio} |")
    return lines


def _cache(results: dict[str, Any]) -> list[str]:
    """The worker's workflow cache in the idle window (Temporal SDK metrics)."""
    cache = ((results.get("temporal") or {}).get("idle") or {}).get("workflow_cache")
    if not cache:
        return []
    told = ", ".join(f"{name} {value:.0f}" for name, value in sorted(cache.items()))
    return ["", f"The worker's workflow cache in the idle window: {told}."]


STAGES = [
    ("to_vm", "apply to VM created"),
    ("boot", "VM created to VM ready (boot)"),
    ("after_boot", "VM ready to instance Ready"),
]


def _stages(results: dict[str, Any]) -> list[str]:
    """Each engine's apply-to-Ready time cut at the VM's creation and its boot."""
    engines = [
        (name, stages)
        for name in ("temporal", "peer")
        if (stages := ((results.get(name) or {}).get("fleet") or {}).get("stages"))
    ]
    if not engines:
        return []
    lines = [
        "",
        "Where each instance's apply-to-Ready time went (p50 / p99, s):",
        "",
        "| Stage | " + " | ".join(name for name, _ in engines) + " |",
        "|---|" + "---|" * len(engines),
    ]
    for key, label in STAGES:
        cells = [f"{_figure(s[f'{key}_p50'])} / {_figure(s[f'{key}_p99'])}" for _, s in engines]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


CPU_NOTE = (
    "the stand-in's exited children are initdb, its live ones the PostgreSQL servers; "
    "machine: all processes, capacity: what the cores could give"
)


def _cpu(results: dict[str, Any]) -> list[str]:
    """CPU seconds each part of the stack used while the fleet (or the floor) came up."""
    runs = [
        (name, used)
        for name in ("floor", "temporal", "peer")
        if (used := _data_of(results.get(name) or {}, "cpu_seconds_by_part"))
    ]
    return _parts_table(f"CPU seconds used until all were ready, by process ({CPU_NOTE}):", runs)


def _idle_cpu(results: dict[str, Any]) -> list[str]:
    """CPU seconds per minute each part used in the idle window, N instances Ready."""
    runs = [
        (name, used)
        for name in ("temporal", "peer")
        if (
            used := ((results.get(name) or {}).get("idle") or {}).get(
                "cpu_seconds_by_part_per_minute"
            )
        )
    ]
    title = f"Idle: CPU seconds per minute by process, {results['n']} instances Ready ({CPU_NOTE}):"
    return _parts_table(title, runs)


def _parts_table(title: str, runs: list[tuple[str, dict[str, float]]]) -> list[str]:
    """One row per process (those that used any CPU), one column per run."""
    if not runs:
        return []
    parts = sorted({p for _, used in runs for p in used} - {"machine", "capacity"})
    lines = [
        "",
        title,
        "",
        "| Part | " + " | ".join(name for name, _ in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for part in [*parts, "machine", "capacity"]:
        if any(used.get(part) for _, used in runs):
            cells = [_figure(used.get(part)) for _, used in runs]
            lines.append(f"| {part} | " + " | ".join(cells) + " |")
    return lines


def _traffic(results: dict[str, Any]) -> list[str]:
    """The API server's busiest requests and watch events: while the fleet came up, per
    instance, and in the idle window, per pass."""
    n = results["n"]
    fleet = [
        (name, {k: v / n for k, v in traffic.items()})
        for name in ("floor", "temporal", "peer")
        if (traffic := _data_of(results.get(name) or {}, "api_traffic"))
    ]
    idle = [
        (name, traffic)
        for name in ("temporal", "peer")
        if (traffic := ((results.get(name) or {}).get("idle") or {}).get("api_traffic_per_pass"))
    ]
    return _busiest("until all were ready (gross, per instance)", fleet) + _busiest(
        "in the idle window (gross: the stack's background too; per pass or re-check)", idle
    )


def _busiest(title: str, runs: list[tuple[str, dict[str, float]]], top: int = 12) -> list[str]:
    if not runs:
        return []
    keys = sorted(
        {k for _, traffic in runs for k in traffic},
        key=lambda k: -max(traffic.get(k, 0) for _, traffic in runs),
    )[:top]
    lines = [
        "",
        f"The API server's {top} busiest requests and watch events {title}:",
        "",
        "| Request | " + " | ".join(name for name, _ in runs) + " |",
        "|---|" + "---|" * len(runs),
    ]
    for key in keys:
        cells = [_figure(traffic.get(key, 0)) for _, traffic in runs]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return lines


def _data_of(data: dict[str, Any], key: str) -> dict[str, float] | None:
    """A fleet's figure, or the floor's (whose figures are not under "fleet")."""
    if key in data:  # the floor
        return data[key]  # type: ignore[no-any-return]
    return (data.get("fleet") or {}).get(key)


def plot(results: dict[str, Any], path: Path) -> None:
    """Instances (or VMs, for the floor) ready over time, one line per engine."""
    figure, axes = plt.subplots(figsize=(7, 4))
    for name in ("floor", "temporal", "peer"):
        data = results.get(name)
        if not data:
            continue
        ready = data["ready_at"] if name == "floor" else data["fleet"]["ready_at"]
        axes.step(ready, range(1, len(ready) + 1), where="post", label=name)
    axes.set_xlabel("seconds since apply")
    axes.set_ylabel("ready")
    axes.set_title(f"{results['n']} DBInstances applied at once")
    axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
