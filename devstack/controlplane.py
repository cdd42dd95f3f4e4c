"""Build and run the local Kubernetes control plane (the Go program beside this file).

The binary is built from the ``k8s.io/kubernetes`` module pinned in
``controlplane/go.mod`` into a git-ignored cache (``devstack.gobuild``).
"""

from __future__ import annotations

import re
import secrets
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack import gobuild, tools
from devstack.process import ManagedProcess, StackError, start_listening

SOURCE_DIR = Path(__file__).resolve().parent / "controlplane"
GO_MOD = SOURCE_DIR / "go.mod"

Progress = Callable[[str], None]


def build(*, cache_dir: Path = tools.CACHE_DIR) -> Path:
    """Return the control-plane binary, building it first if the cache lacks it."""
    return gobuild.build(
        SOURCE_DIR,
        "controlplane",
        what="the Kubernetes control plane",
        ldflags=version_ldflags(),
        cache_dir=cache_dir,
    )


def kubernetes_version() -> str:
    """The Kubernetes release go.mod requires (``v1.36.3``)."""
    found = re.search(r"^\s*k8s\.io/kubernetes (v\d+\.\d+\.\d+)\s*$", GO_MOD.read_text(), re.M)
    if found is None:
        raise StackError(f"{GO_MOD} requires no k8s.io/kubernetes release")
    return found.group(1)


def version_ldflags() -> str:
    """The release stamped into the binary, as Kubernetes' own builds stamp it: the API
    server's /version (what `kubectl version` shows and a chart's kubeVersion is checked
    against) then says ``v1.36.3``, not ``v0.0.0-master``."""
    release = kubernetes_version()
    major, minor, _ = release.removeprefix("v").split(".")
    stamped = {"gitVersion": release, "gitMajor": major, "gitMinor": minor}
    return " ".join(f"-X k8s.io/component-base/version.{k}={v}" for k, v in stamped.items())


@dataclass(frozen=True)
class ControlPlanePorts:
    apiserver: int
    etcd: int
    etcd_peer: int

    @classmethod
    def pick(cls) -> ControlPlanePorts:
        return cls(tools.free_port(), tools.free_port(), tools.free_port())


def service_cidr(data_dir: Path) -> str:
    """The range ClusterIPs come from: a /16 inside 127.0.0.0/8, so that the VM stand-in
    can answer each Service on its ClusterIP on this host (kube-proxy's part,
    ``devstack.vmstandin.services``). Picked at random once per stack, so two stacks on
    one machine rarely share it (the VMs' own addresses are below it, 127.10.0.0 to
    127.31.255.255), and kept in ``data_dir`` (a stack's Services keep their ClusterIPs
    across restarts; a data directory made before this keeps the range it was made
    with, 10.0.0.0/24)."""
    path = data_dir / "service-cidr"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    made_before = (data_dir / "pki").exists()
    cidr = "10.0.0.0/24" if made_before else f"127.{secrets.choice(range(32, 250))}.0.0/16"
    path.write_text(cidr + "\n")
    return cidr


class ControlPlane:
    """Run the control plane with its state in ``data_dir``, which survives restarts."""

    awaiting = "kube-apiserver /readyz"  # what ``ready`` tells

    def __init__(
        self,
        *,
        binary: Path,
        data_dir: Path,
        ports: ControlPlanePorts,
        die_with_parent: bool,
        apiserver_args: tuple[str, ...] = (),
    ) -> None:
        """``apiserver_args`` are extra kube-apiserver flags, e.g. ``--watch-cache=false``."""
        self.binary = binary
        self.data_dir = data_dir
        self.ports = ports
        self.apiserver_args = apiserver_args
        self.service_cidr = service_cidr(data_dir)
        self.process = ManagedProcess(
            "control plane",
            self.argv(),
            log_path=data_dir / "controlplane.log",
            die_with_parent=die_with_parent,
        )

    def argv(self) -> list[str]:
        return [
            str(self.binary),
            f"--data-dir={self.data_dir}",
            f"--apiserver-port={self.ports.apiserver}",
            f"--etcd-port={self.ports.etcd}",
            f"--etcd-peer-port={self.ports.etcd_peer}",
            f"--apiserver-arg=--service-cluster-ip-range={self.service_cidr}",
            *(f"--apiserver-arg={arg}" for arg in self.apiserver_args),
        ]

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def etcd(self) -> str:
        """The embedded etcd's client URL (plain HTTP on loopback; its JSON gateway
        answers under ``/v3/``)."""
        return f"http://127.0.0.1:{self.ports.etcd}"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports.apiserver}"

    def start(self, *, timeout: float = 180.0) -> None:
        """Start the control plane and return once ``/readyz`` answers ok; on other ports
        when one of its own was taken before it bound it (``start_listening``)."""
        start_listening(self, timeout=timeout)

    def repick(self) -> None:
        self.ports = ControlPlanePorts.pick()

    def stop(self) -> None:
        self.process.stop()

    def ready(self) -> bool:
        pki = self.data_dir / "pki"
        if not (pki / "admin.key").exists() or not self.kubeconfig.exists():
            return False
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        try:
            with urllib.request.urlopen(  # noqa: S310 (a fixed https URL of our own)
                f"{self.server}/readyz", context=context, timeout=2
            ) as response:
                return bool(response.status == 200 and response.read() == b"ok")
        except (urllib.error.URLError, OSError, ssl.SSLError):
            return False
