"""The benchmark's Markdown table (figures side by side, with ratios) and its plot."""

from __future__ import annotations

from pathlib import Path
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
    ("fleet", "peak_rss_mib", "Fleet: orchestrator peak RSS (MiB)"),
    ("reaction", "p50", "Reaction: patch to observedGeneration p50 (s)"),
    ("reaction", "p99", "Reaction: patch to observedGeneration p99 (s)"),
    ("reaction", "missed", "Reaction: patches not seen within 60 s (counted as 60 s above)"),
    ("idle", "passes_per_instance_minute", "Idle: passes per instance per minute"),
    ("idle", "activities_per_instance_minute", "Idle: activities per instance per minute"),
    (
        "idle",
        "api_requests_per_instance_minute",
        "Idle: API requests per instance per minute (net)",
    ),
    ("idle", "api_requests_per_pass", "Idle: API requests per pass (net)"),
    ("idle", "max_activity_slots_used", "Idle: most activity slots in use (regular and local)"),
]


def _figure(value: Any) -> str:
    return "-" if value is None else f"{value:.3g}"


def _ratio(a: Any, b: Any) -> str:
    return "-" if a is None or not b else f"{a / b:.2f}x"


def markdown(results: dict[str, Any]) -> str:
    """Return the table: one row per figure, engines side by side, ratios of temporal."""
    temporal, peer = results.get("temporal") or {}, results.get("peer") or {}
    lines = [
        f"N = {results['n']}, healthCheckInterval {results['interval']}",
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
    if seconds := (temporal.get("fleet") or {}).get("time_per_instance"):
        lines += [
            "",
            "Where the temporal engine's fleet time went, per instance (from the histories; "
            f"{seconds['activities']:.3g} activities, {seconds.get('local_activities', 0):.3g} "
            f"of them local, and {seconds['workflow_tasks']:.3g} "
            "workflow tasks each; a local activity runs inside its workflow task):",
            "",
            "| activity queued | activity ran | workflow task queued | workflow task ran |",
            "|---|---|---|---|",
            "| " + " | ".join(f"{seconds[part]:.3g} s" for part in profile.PARTS) + " |",
        ]
    return "\n".join(lines) + "\n"


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
