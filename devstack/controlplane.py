"""Build and run the local Kubernetes control plane (the Go program beside this file).

The binary is built from the ``k8s.io/kubernetes`` module pinned in
``controlplane/go.mod`` into a git-ignored cache, keyed by a digest of its source
and the Go version, so it is rebuilt only when one of them changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from devstack import tools
from devstack.process import ManagedProcess, StackError

SOURCE_DIR = Path(__file__).resolve().parent / "controlplane"

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def source_digest() -> str:
    """Return a digest of the control plane's source, pinned modules and Go version."""
    h = hashlib.sha256()
    for path in sorted([*SOURCE_DIR.glob("*.go"), SOURCE_DIR / "go.mod", SOURCE_DIR / "go.sum"]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    version = subprocess.run([tools.go(), "version"], capture_output=True, text=True, check=True)
    h.update(version.stdout.encode())
    return h.hexdigest()[:16]


def build(*, cache_dir: Path = tools.CACHE_DIR, progress: Progress = _stderr) -> Path:
    """Return the control-plane binary, building it first if the cache lacks it.

    Concurrent callers (a test run and ``dbi dev up``) serialize on a lock file; the
    binary appears under its final name only when complete.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    binary = cache_dir / f"controlplane-{source_digest()}"
    if binary.exists():
        return binary
    with (cache_dir / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        _go_build(binary, progress)
    for old in cache_dir.glob("controlplane-*"):
        if old != binary:
            old.unlink(missing_ok=True)
    return binary


def _go_build(binary: Path, progress: Progress) -> None:
    partial = binary.with_suffix(".partial")
    progress(
        f"building the Kubernetes control plane from {SOURCE_DIR} "
        "(first time: module download and compile take several minutes)"
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [tools.go(), "build", "-v", "-trimpath", "-o", str(partial), "."],
        cwd=SOURCE_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    assert proc.stdout is not None
    output = []
    # `go build -v` names each package as it is compiled.
    for compiled, line in enumerate(proc.stdout, start=1):
        output.append(line)
        if compiled % 100 == 0:
            progress(f"  {compiled} packages compiled, {time.monotonic() - started:.0f}s")
    if proc.wait() != 0:
        raise StackError("building the control plane failed:\n" + "".join(output[-40:]))
    partial.rename(binary)
    size = binary.stat().st_size / 2**20
    progress(f"control plane built in {time.monotonic() - started:.0f}s ({size:.0f} MiB)")


@dataclass(frozen=True)
class ControlPlanePorts:
    apiserver: int
    etcd: int
    etcd_peer: int

    @classmethod
    def pick(cls) -> ControlPlanePorts:
        return cls(tools.free_port(), tools.free_port(), tools.free_port())


class ControlPlane:
    """Run the control plane with its state in ``data_dir``, which survives restarts."""

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
        self.data_dir = data_dir
        self.ports = ports
        self.process = ManagedProcess(
            "control plane",
            [
                str(binary),
                f"--data-dir={data_dir}",
                f"--apiserver-port={ports.apiserver}",
                f"--etcd-port={ports.etcd}",
                f"--etcd-peer-port={ports.etcd_peer}",
                *(f"--apiserver-arg={arg}" for arg in apiserver_args),
            ],
            log_path=data_dir / "controlplane.log",
            die_with_parent=die_with_parent,
        )

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
        """Start the control plane and return once ``/readyz`` answers ok."""
        self.process.start()
        self.process.wait_until(self._ready, what="kube-apiserver /readyz", timeout=timeout)

    def stop(self) -> None:
        self.process.stop()

    def _ready(self) -> bool:
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
