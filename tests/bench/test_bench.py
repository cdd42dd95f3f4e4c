"""The benchmark runs end to end with a small N (a smoke test: it checks that the benchmark
works and reports every figure, not how fast anything is)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.stack


def test_the_benchmark_reports_every_figure_for_every_engine(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--n",
            "2",
            "--reaction",
            "1",
            "--idle",
            "3",
            "--interval",
            "10s",
            "--out",
            str(out),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "temporal: fleet of 2" in run.stderr  # progress is shown
    result = json.loads((out / "result.json").read_text())
    assert len(result["floor"]["ready_at"]) == 2
    for engine in ("temporal", "peer"):
        fleet = result[engine]["fleet"]
        assert len(fleet["ready_at"]) == 2 and fleet["total_seconds"] > 0
        assert fleet["activities_per_instance"] > 0
        assert fleet["cpu_seconds"] > 0 and fleet["peak_rss_mib"] > 0
        # Where the time went: both instances' stages, each process's CPU (initdb is the
        # stand-in's exited children), the API server's requests by verb and resource.
        stages = fleet["stages"]
        assert stages["instances"] == 2 and stages["boot_p50"] > 0
        assert fleet["cpu_seconds_by_part"]["vmstandin exited children"] > 0
        assert fleet["cpu_seconds_by_part"]["machine"] > 0
        assert fleet["api_traffic"]["GET dbinstances"] > 0
        assert result[engine]["idle"]["cpu_seconds_by_part_per_minute"]["controlplane"] > 0
        assert result[engine]["reaction"]["patches"] == 1
        assert result[engine]["reaction"]["missed"] == 0
        assert len(result[engine]["reaction"]["seconds"]) == 1
        assert set(result[engine]["idle"]) >= {
            "passes_per_instance_minute",
            "rechecks_per_instance_minute",
            "api_requests_per_pass",
            "max_activity_slots_used",
        }
    assert result["temporal"]["fleet"]["history_events_per_instance"] > 0
    spent = result["temporal"]["fleet"]["time_per_instance"]
    # Two passes at least (the first finds the VM booting), each one local activity that
    # loads the instance, runs its steps and writes its status, inside its workflow task
    # (the start's wake showed the instance; the VM's wake finds it as the first pass did).
    assert spent["activities"] >= 2
    assert spent["local_activities"] >= 2 and spent["workflow_task_run"] > 0
    # every run starts; a fleet of real VMs is woken by the watcher as they boot
    assert spent["woken_by_start"] >= 1 and spent["woken_by_wake"] > 0
    assert (
        "What brought those workflow tasks, per instance: start" in (out / "result.md").read_text()
    )
    assert "Where the temporal engine's fleet time went" in (out / "result.md").read_text()
    table = (out / "result.md").read_text()
    assert "| Fleet: all Ready (s) |" in table and "temporal fleet / floor" in table
    assert "| VM created to VM ready (boot) |" in table
    assert "| vmstandin exited children |" in table and "| GET dbinstances |" in table
    assert result["floor"]["cpu_seconds_by_part"]["vmstandin exited children"] > 0
    assert (out / "ready.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_arguments_are_refused_naming_the_option() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--n", "2", "--reaction", "5"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and "--reaction" in run.stderr


def test_stubbed_steps_measure_the_engine_alone(tmp_path: Path) -> None:
    """``--steps stub``: no VM is made, every instance is Ready, and each engine's CPU per
    instance, RSS and history growth are reported (``--repeat``'s medians: test_report)."""
    out = tmp_path / "out"
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench",
            "--steps=stub",
            "--n=3",
            "--reaction=1",
            "--idle=22",
            "--settle=1",
            "--interval=10s",
            "--own-passes",
            f"--out={out}",
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "temporal: fleet of 3 (stub steps)" in run.stderr
    assert "peer (run 1 of 1): done" in run.stderr
    assert "temporal: settling for 1s before the idle window" in run.stderr
    result = json.loads((out / "result.json").read_text())
    assert "floor" not in result and result["steps"] == "stub"
    for engine in ("temporal", "peer"):
        fleet, idle = result[engine]["fleet"], result[engine]["idle"]
        assert len(fleet["ready_at"]) == 3
        assert fleet["stages"]["instances"] == 0  # no VM was made
        assert fleet["cpu_seconds_by_part"].get("vmstandin exited children", 0) == 0  # no initdb
        assert fleet["engine_cpu_seconds_per_instance"] > 0
        assert idle["engine_cpu_seconds_per_instance_minute"] > 0
        assert idle["orchestrator_rss_mib"] > 0
        assert result[engine]["reaction"]["missed"] == 0
        assert result["runs"][engine][0]["fleet.engine_cpu_seconds_per_instance"] > 0
    # 22 s at a 10 s interval: each instance, settled by the pass that made it Ready,
    # is looked at twice or so by the worker's re-checks, which add nothing to history
    # (the figure is still read from the sampled histories, and reported).
    idle = result["temporal"]["idle"]
    assert idle["rechecks_per_instance_minute"] > 0
    assert idle["history_events_per_instance_day"] >= 0
    assert result["temporal"]["idle"]["workflow_cache"]
    # 3 instances' own passes, one each every six hours: none due in 22 s, none failed
    assert result["temporal"]["idle"]["own_passes_asked"] == 0
    assert result["temporal"]["idle"]["own_passes_failed"] == 0
    assert "| Fleet: engine CPU per instance" in (out / "result.md").read_text()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--steps=stub", "--engines=floor,temporal"], "--engines"),
        (["--interval=5m"], "--interval"),
        (["--repeat=0"], "--repeat"),
        (["--settle=-1"], "--settle"),
        (["--steps=fake"], "--steps"),
    ],
)
def test_bad_bench_options_are_refused_naming_the_option(argv: list[str], named: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "bench", "--n=2", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2 and named in run.stderr, run.stderr
