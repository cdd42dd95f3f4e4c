"""Run the orchestrator on the local stack: install its API, then the worker and the watcher.

This is what ``dbi dev up`` adds on top of the local stack: the DBInstance CRD, the
dev VirtualMachineImages the default configuration names, the orchestrator's own
namespace (``DBI_NAMESPACE``, where it keeps admin credentials), and the worker and watcher
as processes (``python -m workflows.worker``, ``python -m watcher``), pointed at the
stack's Temporal and kubeconfig.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from dbi import connect, names
from dbi.config import Config
from dbi.spec import SUPPORTED_VERSIONS
from devstack import postgresql, tools
from devstack.process import ManagedProcess, StackError
from devstack.vmstandin.kubevirt import QEMU_LABEL

IMAGES_NAMESPACE = "dbi-images"


CRDS = ("dbinstance.yaml", "dbbackup.yaml", "dbdatabase.yaml", "dbrole.yaml")


def install(api: k8s.ApiClient) -> None:
    """Apply dbi's CRDs and the dev images; wait until the CRDs are served."""
    ext = k8s.ApiextensionsV1Api(api)
    for file in CRDS:
        crd = yaml.safe_load((tools.REPO_ROOT / "crds" / file).read_text())
        ext.patch_custom_resource_definition(
            crd["metadata"]["name"],
            crd,
            field_manager=names.FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        deadline = time.monotonic() + 60
        while not _established(ext.read_custom_resource_definition(crd["metadata"]["name"])):
            if time.monotonic() > deadline:
                raise StackError(f"the CRD in crds/{file} was not established within 60s")
            time.sleep(0.1)
    core, objects = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
    # The images' namespace, and the orchestrator's own (its admin credentials).
    for name in (IMAGES_NAMESPACE, Config.from_env().namespace):
        namespace: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name},
        }
        core.patch_namespace(
            name,
            namespace,
            field_manager=names.FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    for image in dev_images():
        objects.patch_namespaced_custom_object(
            "harvesterhci.io",
            "v1beta1",
            IMAGES_NAMESPACE,
            "virtualmachineimages",
            image["metadata"]["name"],
            image,
            field_manager=names.FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )


def dev_images() -> list[dict[str, Any]]:
    """The dev VirtualMachineImages: ``dbi-images/postgres-<major>`` (each supported
    major's newest build, what DBI_IMAGES names by default) and one per build,
    ``dbi-images/postgres-<major>.<minor>`` (16.13, 16.15, ...: a spec.image to repave
    between). The stand-in boots a VM with the PostgreSQL build its image's label names,
    as a process; the same names prefixed ``qemu-`` boot real VMs from dbi's image of
    that build (``qemu_images``)."""

    def image(name: str, build: str, *, qemu: bool = False) -> dict[str, Any]:
        labels = {postgresql.VERSION_LABEL: build}
        if qemu:
            labels[QEMU_LABEL] = "qemu"
        shown = f"PostgreSQL {build} ({'dbi image on qemu' if qemu else 'dev'})"
        return {
            "apiVersion": "harvesterhci.io/v1beta1",
            "kind": "VirtualMachineImage",
            "metadata": {"name": name, "namespace": IMAGES_NAMESPACE, "labels": labels},
            "spec": {"displayName": shown, "sourceType": "download"},
        }

    named = {f"postgres-{v}": postgresql.BY_MAJOR[v] for v in SUPPORTED_VERSIONS}
    named |= {postgresql.image_name(b): b for b in postgresql.BUILDS}
    return [image(n, b) for n, b in named.items()] + [
        image(f"qemu-{n}", b, qemu=True) for n, b in named.items()
    ]


def qemu_images() -> dict[str, str]:
    """DBI_IMAGES for a stack whose VMs are real VMs (``dbi dev up --vms qemu``)."""
    return {str(v): f"{IMAGES_NAMESPACE}/qemu-postgres-{v}" for v in SUPPORTED_VERSIONS}


SAMPLE = tools.REPO_ROOT / "deploy" / "samples" / "dbinstance.yaml"
SAMPLE_NAMESPACE = "default"


def apply_sample(api: k8s.ApiClient) -> bool:
    """Create the sample DBInstance in ``default`` unless it exists; True if created.

    A second ``dbi dev up`` leaves the one it finds (changed or not) as it is.
    """
    body = yaml.safe_load(SAMPLE.read_text())
    try:
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            SAMPLE_NAMESPACE,
            names.PLURAL,
            body,
            field_manager="dbi-dev-up",
        )
    except k8s.ApiException as e:
        if e.status == 409:
            return False
        raise
    return True


def _established(crd: k8s.V1CustomResourceDefinition) -> bool:
    conditions = crd.status.conditions if crd.status is not None else None
    return any(c.type == "Established" and c.status == "True" for c in conditions or [])


class OrchestratorProcesses:
    """The worker and the watcher as processes of the local stack."""

    def __init__(
        self,
        *,
        kubeconfig: Path,
        temporal_address: str,
        log_dir: Path,
        die_with_parent: bool,
        env: dict[str, dict[str, str]] | None = None,
        worker_module: str = "workflows.worker",
    ) -> None:
        """``env`` adds variables per process ("worker", "watcher"), over the defaults;
        ``worker_module`` is the worker's (the benchmark's stub worker in its stub mode)."""
        self.kubeconfig = kubeconfig
        self.temporal_address = temporal_address
        self.backups = log_dir / "backups"
        self.extra_env = env or {}
        self.metrics_ports = {"worker": tools.free_port(), "watcher": tools.free_port()}
        self.processes = [
            ManagedProcess(
                name,
                [sys.executable, "-m", module],
                log_path=log_dir / f"{name}.log",
                die_with_parent=die_with_parent,
                env=self._env(name),
            )
            for name, module in (("worker", worker_module), ("watcher", "watcher"))
        ]

    def _env(self, name: str) -> dict[str, str]:
        """The process's environment: spans go to its log (one JSON line each) unless the
        user's own OTEL_* variables say otherwise."""
        env = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "TEMPORAL_ADDRESS": self.temporal_address,
            "DBI_METRICS_PORT": str(self.metrics_ports[name]),
            # This host resolves no cluster DNS: the Secret's uri names the ClusterIP too.
            "DBI_CONNECT_HOSTADDR": "1",
            # Backups go to a directory beside the logs, taken with the stack's PostgreSQL.
            "DBI_BACKUP_STORE": f"file://{self.backups}",
            "DBI_PG_BIN_DIR": str(postgresql.bin_dir()),
        }
        if not any(key.startswith("OTEL_") for key in os.environ):
            env["OTEL_TRACES_EXPORTER"] = "console"
        return {**env, **self.extra_env.get(name, {})}

    @property
    def metrics(self) -> dict[str, str]:
        return {
            name: f"http://127.0.0.1:{port}/metrics" for name, port in self.metrics_ports.items()
        }

    def start(self, *, install_api: bool = True) -> None:
        """Install the API (unless told not to), then start both; return once both run."""
        if install_api:
            install(connect.kubernetes(str(self.kubeconfig)))
        for process in self.processes:
            process.start()
            process.wait_until(_logged(process.log_path), what="it to say it runs", timeout=60)

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()

    @property
    def pids(self) -> dict[str, int]:
        return {p.name: p.pid for p in self.processes}


def _logged(path: Path) -> Callable[[], bool]:
    """Return a probe: has the process logged that it runs (worker: polling, watcher: watching)?"""

    def probe() -> bool:
        try:
            text = path.read_text()
        except FileNotFoundError:
            return False
        return "polling task queue" in text or "watching" in text

    return probe
