"""The engine at scale: ``python -m bench.scale [--n 1000,3000,10000]``.

Runs ``python -m bench --steps stub`` (every converge step stubbed, so no guests: the
engine alone) once per N, on a fresh local stack each, with a 5-minute
``healthCheckInterval``, and plots how each figure grows with N (``scale.png``):
time to converge all, the worker's RSS, the engine's idle CPU as a share of one core,
wake-to-pass p50 and p99 (a spec patch to the status showing it, under the idle load),
and history events per instance per day of idling. The idle window holds the settled
instances' own passes at the steady state's rate (``bench --own-passes``: N per six
hours) besides the worker's re-checks; ``--trough`` leaves them out. Each N's own
results are in ``--out``/n-<N>/; ``scale.json`` and ``scale.md`` gather them.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: write files only
import matplotlib.pyplot as plt

from bench import __main__ as bench

# (section, key, label, unit) of each curve, from each N's result.json (temporal).
CURVES = [
    ("fleet", "total_seconds", "time to converge all", "s"),
    ("idle", "orchestrator_rss_mib", "worker RSS, idle", "MiB"),
    ("idle", "engine_cpu_share_of_one_core", "idle CPU, worker + watcher + Temporal", "cores"),
    ("reaction", "p50", "wake-to-pass p50", "s"),
    ("reaction", "p99", "wake-to-pass p99", "s"),
    ("idle", "history_events_per_instance_day", "history events per instance per day", ""),
]


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__)
    parser.add_argument("--n", default="1000,3000,10000", help="instance counts, comma-separated")
    parser.add_argument("--interval", default="300s", help="healthCheckInterval (default 300s)")
    parser.add_argument(
        "--idle",
        type=float,
        default=None,
        help="idle window, s (default: the interval and its spread, 1.1 times it, so that "
        "every instance passes in it)",
    )
    parser.add_argument(
        "--settle",
        type=float,
        default=None,
        help="wait before the idle window, s (default: as long as the idle window, so that "
        "every instance's first health check, a workflow pass, falls before it and the "
        "window sees the steady state)",
    )
    parser.add_argument(
        "--trough",
        action="store_true",
        help="leave the settled instances' own passes out of the idle window (by default "
        "it holds them at the steady state's rate, N per six hours)",
    )
    parser.add_argument("--reaction", type=int, default=20, help="patches timed (default 20)")
    parser.add_argument("--engines", default="temporal", help="default temporal")
    parser.add_argument("--timeout", type=float, default=3600, help="per phase, s")
    parser.add_argument("--out", type=Path, default=Path("bench-scale"), help="output dir")
    args = parser.parse_args(argv)
    try:
        counts = [int(n) for n in args.n.split(",") if n.strip()]
    except ValueError:
        parser.error("--n: whole numbers, comma-separated, such as 1000,3000")
    if not counts or min(counts) < 1:
        parser.error("--n: at least one count, each at least 1")
    if not re.fullmatch(r"[1-9][0-9]*s", args.interval):
        parser.error("--interval: whole seconds, such as 300s")
    idle = args.idle if args.idle is not None else int(args.interval[:-1]) * 1.1
    settle = args.settle if args.settle is not None else idle
    if settle < 0:
        parser.error("--settle: seconds, at least 0")
    args.out.mkdir(parents=True, exist_ok=True)
    gathered: dict[str, Any] = {"interval": args.interval, "runs": {}}
    for n in counts:
        say(f"scale: N = {n}")
        out = args.out / f"n-{n}"
        code = bench.main(
            [
                "--steps=stub",
                f"--n={n}",
                f"--interval={args.interval}",
                f"--idle={idle}",
                f"--settle={settle}",
                f"--reaction={min(args.reaction, n)}",
                f"--engines={args.engines}",
                f"--timeout={args.timeout}",
                f"--out={out}",
                *([] if args.trough else ["--own-passes"]),
            ]
        )
        if code:
            return code
        gathered["runs"][str(n)] = json.loads((out / "result.json").read_text())
        write(gathered, args.out)
    say(f"wrote {args.out}/scale.json, scale.md and scale.png")
    return 0


def write(gathered: dict[str, Any], out: Path) -> None:
    (out / "scale.json").write_text(json.dumps(gathered, indent=2) + "\n")
    (out / "scale.md").write_text(markdown(gathered))
    plot(gathered, out / "scale.png")


def points(gathered: dict[str, Any], section: str, key: str) -> list[tuple[int, float]]:
    """(N, figure) of the temporal engine, by N."""
    found = []
    for n, result in gathered["runs"].items():
        value = ((result.get("temporal") or {}).get(section) or {}).get(key)
        if value is not None:
            found.append((int(n), float(value)))
    return sorted(found)


def markdown(gathered: dict[str, Any]) -> str:
    counts = sorted(int(n) for n in gathered["runs"])
    lines = [
        f"Stubbed steps, healthCheckInterval {gathered['interval']}, temporal engine",
        "",
        "| Figure | " + " | ".join(f"N = {n}" for n in counts) + " |",
        "|---|" + "---|" * len(counts),
    ]
    for section, key, label, unit in CURVES:
        by_n = dict(points(gathered, section, key))
        cells = [f"{by_n[n]:.3g}" if n in by_n else "-" for n in counts]
        lines.append(f"| {label}{f' ({unit})' if unit else ''} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot(gathered: dict[str, Any], path: Path) -> None:
    """One panel per figure, N on the x axis."""
    figure, grid = plt.subplots(2, 3, figsize=(12, 6.5))
    for axes, (section, key, label, unit) in zip(grid.flat, CURVES, strict=True):
        found = points(gathered, section, key)
        axes.plot([n for n, _ in found], [v for _, v in found], marker="o")
        axes.set_title(label, fontsize=10)
        axes.set_xlabel("instances")
        if unit:
            axes.set_ylabel(unit)
        axes.set_ylim(bottom=0)
    figure.suptitle(f"The engine at scale (steps stubbed, interval {gathered['interval']})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(main())
