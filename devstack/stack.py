"""Bring the whole local stack up and down: control plane, VM stand-in, Temporal, and
(for ``dbi dev up``) the orchestrator's worker and watcher.

The stack keeps its state (etcd data, certificates, the Temporal database, logs and
the ports it chose) in one directory, so ``dbi dev up`` after ``dbi dev down``
finds every object and workflow where it left them. ``stack.json`` in that
directory tells other commands (and ``dbi dev down``) where things run.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType

from dbi.config import Config
from devstack import controlplane, exporter, orchestrator, postgresql, tools
from devstack.controlplane import ControlPlane, ControlPlanePorts
from devstack.orchestrator import OrchestratorProcesses
from devstack.process import ManagedProcess, StackError, stop_group
from devstack.temporal import TemporalDevServer
from devstack.vmstandin import qemu
from devstack.vmstandin.process import VMStandIn
from images import build as images
from images.recipe import Recipe

DEFAULT_STATE_DIR = tools.REPO_ROOT / ".cache" / "dev"
DEFAULT_UI_PORT = 8233


@dataclass(frozen=True)
class StackInfo:
    """Where the running stack can be reached, as written to ``stack.json``."""

    state_dir: str
    kubeconfig: str
    apiserver: str
    temporal_address: str
    temporal_ui: str | None
    pids: dict[str, int]
    metrics: dict[str, str] = field(default_factory=dict)  # process -> its /metrics URL
    vms: str = "process"  # how the sample's VMs boot: "process", or "qemu (tcg)", ...

    @classmethod
    def load(cls, state_dir: Path) -> StackInfo | None:
        try:
            data = json.loads((state_dir / "stack.json").read_text())
        except FileNotFoundError:
            return None
        return cls(**data)

    def save(self) -> None:
        path = Path(self.state_dir) / "stack.json"
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    def alive(self) -> dict[str, int]:
        """Return the processes of this stack that still run."""
        return {name: pid for name, pid in self.pids.items() if _is_alive(pid)}


@dataclass(frozen=True)
class Ports:
    controlplane: ControlPlanePorts
    temporal: int
    temporal_ui: int | None

    @classmethod
    def reuse_or_pick(cls, state_dir: Path, ui_port: int | None) -> Ports:
        """Reuse the ports of the previous run when they are free, else pick new ones.

        etcd records its peer address in its data, so keeping the ports keeps a
        restarted stack identical to the one before.
        """
        path = state_dir / "ports.json"
        try:
            saved = json.loads(path.read_text())
            previous = cls(
                ControlPlanePorts(**saved["controlplane"]), saved["temporal"], saved["temporal_ui"]
            )
        except (FileNotFoundError, KeyError, TypeError, ValueError):
            previous = None
        if previous is not None and previous.temporal_ui == ui_port and previous._all_free():
            return previous
        return cls(ControlPlanePorts.pick(), tools.free_port(), ui_port)

    def save(self, state_dir: Path) -> None:
        """Keep the ports the stack runs on, for the next start to reuse."""
        saved = {
            "controlplane": asdict(self.controlplane),
            "temporal": self.temporal,
            "temporal_ui": self.temporal_ui,
        }
        (state_dir / "ports.json").write_text(json.dumps(saved))

    def _all_free(self) -> bool:
        cp = self.controlplane
        wanted = [cp.apiserver, cp.etcd, cp.etcd_peer, self.temporal]
        return all(tools.port_is_free(p) for p in wanted)


class LocalStack:
    """Start the control plane and the Temporal dev server; stop them in reverse.

    ``detached`` processes outlive this Python process (``dbi dev up --detach``);
    otherwise they die with it, so a killed test run leaves nothing behind.
    """

    def __init__(
        self,
        *,
        state_dir: Path,
        ui_port: int | None = None,
        detached: bool = False,
        orchestrator: bool = False,
        worker_module: str = "workflows.worker",
        vms: str = "process",
    ) -> None:
        """``vms``: "qemu" makes the orchestrator boot real VMs from dbi's images (its
        DBI_IMAGES names the qemu- dev images); the default image is built first."""
        self.state_dir = state_dir.resolve()
        self.vms_mode = vms
        self.ui_port = ui_port
        self.detached = detached
        self.with_orchestrator = orchestrator
        self.worker_module = worker_module
        self.orchestrator: OrchestratorProcesses | None = None
        self.kubelet: ManagedProcess | None = None  # serves the orchestrator's logs as pods'
        self.controlplane: ControlPlane | None = None
        self.temporal: TemporalDevServer | None = None
        self.vms: VMStandIn | None = None
        self.info: StackInfo | None = None

    def start(self) -> StackInfo:
        """Build what is missing, start every process, and wait until each is ready."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        previous = StackInfo.load(self.state_dir)
        if previous is not None and (running := previous.alive()):
            raise StackError(
                f"a stack already runs from {self.state_dir} (pids {running}); "
                "stop it with `dbi dev down` first"
            )
        binary = controlplane.build()
        postgresql.install()  # the guests' binaries
        metrics = exporter.build()
        if self.vms_mode == "qemu":
            _build_default_image()
        ports = Ports.reuse_or_pick(self.state_dir, self.ui_port)
        die_with_parent = not self.detached
        try:
            self.controlplane = ControlPlane(
                binary=binary,
                data_dir=self.state_dir / "controlplane",
                ports=ports.controlplane,
                die_with_parent=die_with_parent,
            )
            self.controlplane.start()
            self.vms = VMStandIn(
                kubeconfig=self.controlplane.kubeconfig,
                data_dir=self.state_dir / "vms",
                exporter=metrics,
                die_with_parent=die_with_parent,
            )
            self.vms.start()
            self.temporal = TemporalDevServer(
                data_dir=self.state_dir,
                port=ports.temporal,
                ui_port=ports.temporal_ui,
                die_with_parent=die_with_parent,
            )
            self.temporal.start()
            # Either may have started on other ports than picked (``start_listening``).
            Ports(self.controlplane.ports, self.temporal.port, self.ui_port).save(self.state_dir)
            if self.with_orchestrator:
                self.orchestrator = OrchestratorProcesses(
                    kubeconfig=self.controlplane.kubeconfig,
                    temporal_address=self.temporal.address,
                    log_dir=self.state_dir,
                    die_with_parent=die_with_parent,
                    worker_module=self.worker_module,
                    env=self._orchestrator_env(),
                )
                self.orchestrator.start()
                self.kubelet = _kubelet(
                    self.controlplane.kubeconfig, self.state_dir, die_with_parent=die_with_parent
                )
                self.kubelet.start()
                self.kubelet.wait_until(
                    lambda: (
                        "serving the logs" in self.state_dir.joinpath("kubelet.log").read_text()
                    ),
                    what="it to serve the processes' logs",
                    timeout=60,
                )
        except BaseException:
            self.stop()
            raise
        self.info = StackInfo(
            state_dir=str(self.state_dir),
            kubeconfig=str(self.controlplane.kubeconfig),
            apiserver=self.controlplane.server,
            temporal_address=self.temporal.address,
            temporal_ui=self.temporal.ui_url,
            pids={
                "controlplane": self.controlplane.process.pid,
                "vmstandin": self.vms.process.pid,
                "temporal": self.temporal.process.pid,
                **(self.orchestrator.pids if self.orchestrator else {}),
                **({"kubelet": self.kubelet.pid} if self.kubelet else {}),
            },
            metrics=self.orchestrator.metrics if self.orchestrator else {},
            vms=f"qemu ({qemu.accelerator()})" if self.vms_mode == "qemu" else "process",
        )
        self.info.save()
        return self.info

    def _orchestrator_env(self) -> dict[str, dict[str, str]]:
        if self.vms_mode != "qemu":
            return {}
        return {"worker": {"DBI_IMAGES": json.dumps(orchestrator.qemu_images())}}

    def stop(self) -> None:
        """Stop the orchestrator, Temporal, the VM stand-in, then the control plane.

        Safe to call more than once.
        """
        for part in (self.kubelet, self.orchestrator, self.temporal, self.vms, self.controlplane):
            if part is not None:
                part.stop()
        (self.state_dir / "stack.json").unlink(missing_ok=True)

    def __enter__(self) -> StackInfo:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _kubelet(kubeconfig: Path, state_dir: Path, *, die_with_parent: bool) -> ManagedProcess:
    """The kubelet stand-in that shows the worker and the watcher as Pods of dbi's
    namespace, so that `dbi logs` and `kubectl logs` read their logs (devstack/kubelet.py)."""
    return ManagedProcess(
        "kubelet",
        [
            sys.executable,
            "-m",
            "devstack.kubelet",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={Config.from_env().namespace}",
            f"--log-dir={state_dir}",
        ],
        log_path=state_dir / "kubelet.log",
        die_with_parent=die_with_parent,
    )


def _build_default_image() -> None:
    """Build dbi's image of the default PostgreSQL build unless it is built (progress on
    stderr); say what is missing where it cannot be built."""
    recipe = Recipe(postgresql.VERSION)
    if missing := qemu.missing_tools():
        raise StackError(f"--vms qemu needs {', '.join(missing)}: apt-get install {qemu.PACKAGES}")
    try:
        images.build(recipe, images.default_cache(), builds=tools.CACHE_DIR)
    except images.BuildFailed as e:
        raise StackError(f"--vms qemu needs dbi's image of PostgreSQL {recipe.version}: {e}") from e


def down(state_dir: Path, *, timeout: float = 30.0) -> list[str]:
    """Stop a stack started from ``state_dir`` by another process; return what was stopped."""
    info = StackInfo.load(state_dir.resolve())
    if info is None:
        return []
    stopped = []
    for name in ("kubelet", "watcher", "worker", "temporal", "vmstandin", "controlplane"):
        pid = info.pids.get(name)
        if pid is not None and _is_alive(pid):
            stop_group(pid, timeout=timeout)
            stopped.append(name)
    (state_dir / "stack.json").unlink(missing_ok=True)
    return stopped


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # Reaped-but-listed processes show as zombies; they are not running.
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], *, timeout: float) -> bool:
    """Return True once none of ``pids`` runs, False if some still run at ``timeout``."""
    deadline = time.monotonic() + timeout
    while any(_is_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True
