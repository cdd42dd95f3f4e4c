"""promtool, to evaluate dbi's alerts (deploy/monitoring/prometheusrule.yaml) against
series in tests, as Prometheus would: github.com/prometheus/prometheus/cmd/promtool,
pinned in ``promtool/go.mod`` and built once per pin into the devstack cache, like the
control plane. Dev and test tooling."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devstack import gobuild

SOURCE_DIR = Path(__file__).resolve().parent / "promtool"
PACKAGE = "github.com/prometheus/prometheus/cmd/promtool"


def build() -> Path:
    """promtool, built first if the cache lacks it."""
    return gobuild.build(SOURCE_DIR, "promtool", what="promtool", package=PACKAGE)


def evaluate(test_file: Path) -> subprocess.CompletedProcess[str]:
    """``promtool test rules TEST_FILE``: exit 0 when every alert it expects fires as
    expected (and no other); its output says what differs."""
    return subprocess.run(
        [str(build()), "test", "rules", str(test_file)],
        capture_output=True,
        text=True,
        check=False,
        cwd=test_file.parent,
    )
