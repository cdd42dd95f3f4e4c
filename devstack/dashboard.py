"""The Grafana dashboard for dbi's processes and its instances
(deploy/monitoring/dashboard.json), built with Grafana's Foundation SDK.

    python -m devstack.dashboard      # rewrites deploy/monitoring/dashboard.json

tests/journeys/test_monitoring.py checks the file is what this builds, that Grafana's
dashboard schema takes it (``check``: the Foundation SDK's Go types, strict, in the
small program ``dashboardcheck/``) and that every query names a metric the running
worker or watcher serves. Dev tooling: the product ships the JSON, not this."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

from devstack import gobuild, tools

PATH = tools.REPO_ROOT / "deploy" / "monitoring" / "dashboard.json"
SOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")


def query(expr: str, legend: str = "", ref: str = "A") -> prometheus.Dataquery:
    q = prometheus.Dataquery().expr(expr).datasource(SOURCE).ref_id(ref)
    return q.legend_format(legend) if legend else q


def series(title: str, description: str, expr: str, legend: str, unit: str = "short") -> Any:
    return (
        timeseries.Panel()
        .title(title)
        .description(description)
        .datasource(SOURCE)
        .with_target(query(expr, legend))
        .unit(unit)
        .height(8)
        .span(12)
    )


def build() -> dict[str, Any]:
    """The dashboard, as the JSON Grafana imports."""
    board = (
        dashboard.Dashboard("dbi")
        .uid("dbi-overview")
        .description("dbi's worker and watcher, and the DBInstances they serve.")
        .tags(["dbi", "postgresql"])
        .refresh("30s")
        .time("now-6h", "now")
        .with_variable(dashboard.DatasourceVariable("datasource").type("prometheus"))
        .with_row(dashboard.Row("Instances"))
        .with_panel(
            stat.Panel()
            .title("Ready")
            .description("DBInstances whose Ready condition is True (dbi_instance_ready).")
            .datasource(SOURCE)
            .with_target(query("sum(max by (namespace, name) (dbi_instance_ready))"))
            .height(6)
            .span(6)
        )
        .with_panel(
            stat.Panel()
            .title("Not Ready")
            .description("DBInstances whose Ready condition is not True.")
            .datasource(SOURCE)
            .with_target(query("count(max by (namespace, name) (dbi_instance_ready) == 0)"))
            .no_value("0")
            .height(6)
            .span(6)
        )
        .with_panel(
            table.Panel()
            .title("Instances not Ready")
            .description("`dbi describe NAME -n NS` says which condition holds each.")
            .datasource(SOURCE)
            .with_target(
                query("max by (namespace, name) (dbi_instance_ready) == 0")
                .instant()
                .format(PromQueryFormat.TABLE)
            )
            .height(6)
            .span(12)
        )
        .with_panel(
            series(
                "Instances by phase",
                "dbi_instances: the DBInstances the leading watcher sees, by status phase.",
                "max by (phase) (dbi_instances)",
                "{{phase}}",
            )
        )
        .with_panel(
            series(
                "Changes converged, p99",
                "From the first pass that saw a new generation to the status showing it converged.",
                "histogram_quantile(0.99, sum by (le) "
                "(rate(dbi_generation_ready_seconds_bucket[30m])))",
                "p99",
                "s",
            )
        )
        .with_row(dashboard.Row("Passes and steps"))
        .with_panel(
            series(
                "Passes by outcome",
                "Convergence passes whose status was written.",
                "sum by (outcome) (rate(dbi_passes_total[5m]))",
                "{{outcome}}",
                "ops",
            )
        )
        .with_panel(
            series(
                "Step errors",
                "Step activities that raised, by step and exception; the workflow retries.",
                'sum by (step, reason) (rate(dbi_step_outcomes_total{outcome="error"}[10m]))',
                "{{step}} {{reason}}",
                "ops",
            )
        )
        .with_panel(
            series(
                "Step duration, p95",
                "One step activity attempt, by step.",
                "histogram_quantile(0.95, sum by (le, step) "
                "(rate(dbi_step_duration_seconds_bucket[10m])))",
                "{{step}}",
                "s",
            )
        )
        .with_panel(
            series(
                "Re-checks by result",
                "The worker's checks of settled instances between passes: quiet, or "
                "changed (the workflow was woken).",
                "sum by (result) (rate(dbi_rechecks_total[10m]))",
                "{{result}}",
                "ops",
            )
        )
        .with_row(dashboard.Row("Processes"))
        .with_panel(
            series(
                "Health checks",
                "1: the check passes (/readyz says why one does not).",
                "min by (pod, check) (dbi_check_ok)",
                "{{pod}} {{check}}",
            )
        )
        .with_panel(
            series(
                "Watcher wakes",
                "Wake signals the watcher sent, and those that failed.",
                "sum(rate(dbi_watcher_signals_total[5m]))",
                "sent",
                "ops",
            ).with_target(
                query("sum(rate(dbi_watcher_signal_failures_total[5m]))", "failed", ref="B")
            )
        )
    )
    encoded: dict[str, Any] = json.loads(
        JSONEncoder(sort_keys=True, indent=2).encode(board.build())
    )
    for number, panel in enumerate(encoded["panels"], start=1):
        panel["id"] = number  # Grafana keys a panel's links and state by it
    return encoded


def checker() -> Path:
    """The schema check, built first if the cache lacks it."""
    source = Path(__file__).resolve().parent / "dashboardcheck"
    return gobuild.build(source, "dashboardcheck", what="the dashboard schema check")


def check(binary: Path, dashboard_json: str) -> str:
    """What Grafana's dashboard schema finds wrong in ``dashboard_json``, one error per
    line with its path (``panels[1].targets[0].expr: ...``); empty when it takes it."""
    done = subprocess.run(
        [str(binary)],
        input=dashboard_json,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,  # 1: the schema's errors, on stderr
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"dashboardcheck failed ({done.returncode}): {done.stderr}")
    return done.stderr.strip()


def text() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    PATH.write_text(text())
    print(PATH)
