"""deploy/monitoring: the PodMonitor scrapes what the Deployments serve, and every alert
of the PrometheusRule and every query of the Grafana dashboard parses as PromQL and names
only metrics the running worker and watcher serve (read from their /metrics, not from a
list kept by hand)."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import promql_parser
import pytest
import yaml

from devstack import dashboard
from tests.deployment import server_dry_run
from tests.journeys.product import Product
from tests.stack import Kubectl

pytestmark = pytest.mark.stack

SUFFIXES = re.compile(r"_(total|bucket|count|sum|created)$")


def rendered(kubectl: Kubectl, repo_root: Path) -> dict[str, Any]:
    out = kubectl("kustomize", str(repo_root / "deploy" / "monitoring")).stdout
    return {doc["kind"]: doc for doc in yaml.safe_load_all(out) if doc}


def served(urls: list[str]) -> set[str]:
    """The metric families the processes serve (each with its suffixes taken off)."""
    names = set()
    for url in urls:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (localhost)
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith("# TYPE "):
                names.add(SUFFIXES.sub("", line.split()[2]))
    return names


def test_every_alert_parses_and_names_only_metrics_the_processes_serve(
    product: Product, kubectl: Kubectl, repo_root: Path
) -> None:
    rules = [
        rule
        for group in rendered(kubectl, repo_root)["PrometheusRule"]["spec"]["groups"]
        for rule in group["rules"]
    ]
    assert len(rules) >= 5
    families = served(list(product.metrics.values()))
    assert "dbi_check_ok" in families and "dbi_watcher_signals" in families, families
    guide = (repo_root / "docs" / "observability.md").read_text()
    runbook = (repo_root / "docs" / "operations.md").read_text().splitlines()
    for rule in rules:
        promql_parser.parse(rule["expr"])  # ValueError names what is wrong
        named = set(re.findall(r"\bdbi_\w+", rule["expr"]))
        assert named, rule
        assert {SUFFIXES.sub("", n) for n in named} <= families, (rule["alert"], named)
        assert rule["labels"]["severity"] in ("warning", "critical"), rule
        assert rule["annotations"]["summary"], rule
        assert f"`{rule['alert']}`" in guide, f"docs/observability.md lacks {rule['alert']}"
        # Its runbook: the section of docs/operations.md named after it, as published.
        url = f"https://dbi.dev/docs/operations#{rule['alert'].lower()}"
        assert rule["annotations"]["runbook_url"] == url, rule
        assert f"### {rule['alert']}" in runbook, f"docs/operations.md: no ### {rule['alert']}"


def test_every_dashboard_query_parses_and_names_only_metrics_the_processes_serve(
    product: Product, repo_root: Path
) -> None:
    """deploy/monitoring/dashboard.json is what devstack/dashboard.py builds with Grafana's
    SDK (rebuild it with `python -m devstack.dashboard`), and each panel's queries name
    metrics the worker or the watcher serves."""
    shipped = json.loads((repo_root / "deploy" / "monitoring" / "dashboard.json").read_text())
    assert shipped == dashboard.build()
    families = served(list(product.metrics.values()))
    panels = [p for p in shipped["panels"] if p["type"] != "row"]
    assert len(panels) >= 8
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            promql_parser.parse(target["expr"])
            named = set(re.findall(r"\bdbi_\w+", target["expr"]))
            assert named, (panel["title"], target["expr"])
            assert {SUFFIXES.sub("", n) for n in named} <= families, (panel["title"], named)
    assert len({p["id"] for p in shipped["panels"]}) == len(shipped["panels"])


def test_the_podmonitor_scrapes_the_worker_and_the_watcher_and_applies(
    kubectl: Kubectl, repo_root: Path, deploy_manifests: list[dict[str, Any]], deployed_rbac: Any
) -> None:
    """Its selector picks both Deployments' pods, on a port they name; the API server
    (with the Prometheus Operator's own CRDs: devstack/crds.py) accepts both objects."""
    monitor = rendered(kubectl, repo_root)["PodMonitor"]
    (expression,) = monitor["spec"]["selector"]["matchExpressions"]
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    for deployment in (m for m in deploy_manifests if m["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]
        assert pod["metadata"]["labels"][expression["key"]] in expression["values"]
        (container,) = pod["spec"]["containers"]
        assert endpoint["port"] in {p["name"] for p in container["ports"]}
    result = server_dry_run(kubectl, repo_root / "deploy" / "monitoring")
    assert "podmonitor.monitoring.coreos.com/dbi serverside-applied" in result.stdout
    assert "prometheusrule.monitoring.coreos.com/dbi serverside-applied" in result.stdout


def test_grafanas_dashboard_schema_takes_the_dashboard(repo_root: Path) -> None:
    """Grafana's dashboard schema (the Foundation SDK's Go types, decoding strictly:
    devstack/dashboardcheck) takes deploy/monitoring/dashboard.json, and names what is
    wrong in a broken copy: a misspelt query field, a grid width that is not a number."""
    checker = dashboard.checker()
    shipped = (repo_root / "deploy" / "monitoring" / "dashboard.json").read_text()
    assert dashboard.check(checker, shipped) == ""
    board = json.loads(shipped)
    number, panel = next((i, p) for i, p in enumerate(board["panels"]) if p.get("targets"))
    panel["targets"][0]["exprr"] = panel["targets"][0].pop("expr")
    panel["gridPos"]["w"] = "wide"
    found = dashboard.check(checker, json.dumps(board))
    assert f"panels[{number}].targets[0].Dataquery: unexpected field 'exprr'" in found, found
    assert f"panels[{number}].gridPos.w: json: cannot unmarshal string" in found, found
