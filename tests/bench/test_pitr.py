"""bench.pitr runs end to end with a small size (a smoke test: it checks that the
benchmark works, reports every figure and restores what was written, not how fast)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.stack


def test_the_pitr_benchmark_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "out"
    small = ["--size", "32", "--rate", "0.5", "--load", "15", "--timeout", "300"]
    run = subprocess.run(
        [sys.executable, "-m", "bench.pitr", *small, "--out", str(out)],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "recovery point: 0.5 MiB/s of rows" in run.stderr  # progress is shown
    figures = json.loads((out / "pitr.json").read_text())
    assert figures["restored_rows"] > 32 * 1024  # the burst's rows, and the load's
    assert figures["recovery_point"]["samples"] >= 2
    for phase in ("backup", "restore", "archive"):
        assert figures[phase]["s"] > 0 and figures[phase]["cpu_s"] > 0, figures
    assert figures["archive"]["mib"] >= 16 and figures["archive"]["mib_per_s"] > 0, figures
