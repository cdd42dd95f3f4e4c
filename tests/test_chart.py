"""charts/dbi, the Helm chart: it renders the objects deploy/'s overlays render (so the
two installs cannot drift apart), the API server accepts it with every option set, its
options reach the variables the processes read, and a wrong value is refused naming the
field. tests/journeys/test_namespaced.py and the hostile-tenant suite install it for real."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from temporalio.envconfig import ClientConfigProfile

from devstack import controlplane, helm
from devstack.stack import StackInfo
from tests.deployment import SYSTEM_NAMESPACE, container_problems
from tests.stack import Kubectl

pytestmark = pytest.mark.stack

# Labels Helm's charts set by convention; deploy/ sets the rest of them too.
HELM_LABELS = {
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "helm.sh/chart",
}
EVERY_OPTION = ",".join(
    (
        "temporal.tls.enabled=true",
        "temporal.tls.secretName=temporal-tls",
        "temporal.apiKeySecret.name=temporal-api-key",
        "images.18=dbi-images/dbi-postgresql-18-6",
        "backup.store=s3://bucket/dbi",
        "backup.s3Endpoint=https://minio.example:9000",
        "backup.credentialsSecret=dbi-backup-store",
        "monitoring.podMonitor=true",
        "monitoring.prometheusRule=true",
        "monitoring.grafanaDashboard=true",
        "monitoring.runbookBaseUrl=https://wiki.example/dbi/alerts",
        "worker.serviceAccountAnnotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/dbi",
    )
)
Key = tuple[str, str, str]


def comparable(text: str) -> dict[Key, Any]:
    """Each object by (kind, namespace, name), without what only tells the two tools
    apart: Helm's labels and annotations (its hook, its pods' checksum), kustomize's
    hash on the ConfigMap's name, the pull policy, the order of a container's env, the
    Namespace (Helm's --create-namespace makes it) and the CRDs' labels (Helm installs
    crds/ as the files are)."""
    text = re.sub(r"\bdbi-temporal-[a-z0-9]{10}\b", "dbi-temporal", text)
    objects = {}
    for doc in yaml.safe_load_all(text):
        if not doc or doc["kind"] == "Namespace":
            continue
        meta = doc["metadata"]
        meta.pop("annotations", None)
        labels = {k: v for k, v in meta.pop("labels", {}).items() if k not in HELM_LABELS}
        if labels and doc["kind"] != "CustomResourceDefinition":
            meta["labels"] = labels
        template = doc.get("spec", {}).get("template")
        if isinstance(template, dict):
            template["metadata"].pop("annotations", None)
            for container in template["spec"]["containers"]:
                container.pop("imagePullPolicy", None)
                container.get("env", []).sort(key=lambda e: e["name"])
        objects[(doc["kind"], meta.get("namespace", ""), meta["name"])] = doc
    return objects


def kustomized(kubectl: Kubectl, directory: Path) -> dict[Key, Any]:
    return comparable(kubectl("kustomize", str(directory)).stdout)


@pytest.mark.parametrize(
    ("overlay", "options"),
    [("cluster-wide", ()), ("namespaced", ("--set", "watchNamespaces={team-a,team-b}"))],
)
def test_the_chart_renders_what_the_overlay_renders(
    kubectl: Kubectl, repo_root: Path, overlay: str, options: tuple[str, ...]
) -> None:
    expected = kustomized(kubectl, repo_root / "deploy" / overlay)
    rendered = comparable(helm.template(SYSTEM_NAMESPACE, *options))
    assert sorted(rendered) == sorted(expected)
    for key, obj in expected.items():
        assert rendered[key] == obj, key


def test_the_monitoring_options_render_deploy_monitoring(kubectl: Kubectl, repo_root: Path) -> None:
    plain = comparable(helm.template(SYSTEM_NAMESPACE))
    options = "monitoring.podMonitor=true,monitoring.prometheusRule=true,"
    options += "monitoring.grafanaDashboard=true"
    monitored = comparable(helm.template(SYSTEM_NAMESPACE, "--set", options))
    added = {key: obj for key, obj in monitored.items() if key not in plain}
    assert added == kustomized(kubectl, repo_root / "deploy" / "monitoring")


def test_the_api_server_accepts_the_chart_with_every_option_set(
    kubectl: Kubectl, deployed_rbac: list[dict[str, Any]]
) -> None:
    """A server-side dry run of every object (the namespace exists: ``deployed_rbac``;
    --force-conflicts: that fixture applied the same RBAC under another field manager)."""
    text = helm.template(SYSTEM_NAMESPACE, "--set", EVERY_OPTION)
    result = kubectl(
        "apply",
        "--server-side",
        "--dry-run=server",
        "--force-conflicts",
        "--field-manager=dbi-chart-test",
        "-f",
        "-",
        stdin=text,
    )
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    objects = [doc for doc in yaml.safe_load_all(text) if doc]
    assert len(applied) == len(objects), applied
    kinds = {doc["kind"] for doc in objects}
    assert {"PodMonitor", "PrometheusRule", "CustomResourceDefinition"} <= kinds


def test_helm_install_dry_run_server_accepts_the_chart(
    kubectl: Kubectl, local_stack: StackInfo, namespace: str
) -> None:
    """`helm install --dry-run=server` as docs/deploy.md runs it: the chart's kubeVersion
    holds for the API server's version (the control plane carries its release,
    devstack/controlplane.py), and the server accepts every object it would create."""
    server = json.loads(kubectl("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert server == controlplane.kubernetes_version()
    out = helm.run(
        "install",
        "dbi",
        str(helm.CHART),
        "--namespace",
        namespace,
        "--dry-run=server",
        # The cluster-wide objects (ClusterRoles) exist already when deploy/'s RBAC is
        # applied in this session, without Helm's ownership marks; a dry run takes none.
        "--take-ownership",
        "--kubeconfig",
        local_stack.kubeconfig,
        "--set",
        EVERY_OPTION,
    )
    assert "STATUS: pending-install" in out and "kind: Deployment" in out, out[:2000]


def test_every_option_reaches_a_variable_the_process_reads(repo_root: Path) -> None:
    """With every option set, each container runs the image and a process that reads
    every variable it is given (dbi's own, or the Temporal SDK's client configuration:
    TLS files and API key); the files those name are in a volume the container mounts."""
    objects = [o for o in yaml.safe_load_all(helm.template("dbi", "--set", EVERY_OPTION)) if o]
    (config,) = [o["data"] for o in objects if o["metadata"]["name"] == "dbi-temporal"]
    pods = [o for o in objects if o["kind"] in ("Deployment", "Job")]
    assert len(pods) == 3
    for pod in pods:
        (container,) = pod["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e.get("value", "from-a-secret") for e in container.get("env", [])}
        env |= config
        profile = ClientConfigProfile.load(disable_file=True, override_env_vars=env)
        assert profile.api_key == "from-a-secret"
        assert profile.tls is not None
        files = [
            profile.tls.server_root_ca_cert,
            profile.tls.client_cert,
            profile.tls.client_private_key,
        ]
        mounts = [m["mountPath"] for m in container["volumeMounts"]]
        for file in files:
            assert any(str(file).startswith(f"{m}/") for m in mounts), (file, mounts)
        sdk = {
            "TEMPORAL_API_KEY",
            "TEMPORAL_TLS",
            *(k for k in env if k.startswith("TEMPORAL_TLS_")),
        }
        problems = container_problems(
            repo_root, container["image"], container["args"], set(env) - sdk
        )
        if pod["kind"] == "Job":  # `dbi temporal setup`: the Temporal settings alone
            problems = [p for p in problems if "not the worker or the watcher" not in p]
        assert problems == [], (pod["metadata"]["name"], problems)
    (worker,) = [p for p in pods if p["metadata"]["name"] == "dbi-worker"]
    env = {e["name"]: e for e in worker["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["DBI_BACKUP_STORE"]["value"] == "s3://bucket/dbi"
    assert json.loads(env["DBI_IMAGES"]["value"]) == {"18": "dbi-images/dbi-postgresql-18-6"}
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert env[variable]["valueFrom"]["secretKeyRef"]["name"] == "dbi-backup-store"
    # IRSA: the role the backup store's web identity assumes.
    (account,) = [
        o
        for o in objects
        if o["metadata"]["name"] == "dbi-worker" and o["kind"] == "ServiceAccount"
    ]
    assert account["metadata"]["annotations"] == {
        "eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/dbi"
    }
    # Each alert links to its section of the runbook where the docs are served.
    (rule,) = [o for o in objects if o["kind"] == "PrometheusRule"]
    alerts = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert alerts and {r["annotations"]["runbook_url"] for r in alerts} == {
        f"https://wiki.example/dbi/alerts#{r['alert'].lower()}" for r in alerts
    }


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("watchNamespace={team-a}", "'watchNamespace' not allowed"),
        ("temporal.address=temporal-frontend", "/temporal/address"),
        ("backup.store=gs://bucket", "/backup/store"),
        ("worker.replicas=two", "/worker/replicas"),
        ("watchNamespaces={Team_A}", "/watchNamespaces/0"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("monitoring.runbookBaseUrl=wiki/dbi", "/monitoring/runbookBaseUrl"),
    ],
)
def test_a_wrong_value_is_refused_naming_the_field(setting: str, named: str) -> None:
    with pytest.raises(subprocess.CalledProcessError) as refused:
        helm.template(SYSTEM_NAMESPACE, "--set", setting)
    assert named in refused.value.stderr
