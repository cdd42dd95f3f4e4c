"""Run the VM stand-in as a process of the local stack."""

from __future__ import annotations

import sys
from pathlib import Path

from devstack.process import ManagedProcess


class VMStandIn:
    """Start ``python -m devstack.vmstandin`` and wait until it watches the cluster."""

    def __init__(
        self, *, kubeconfig: Path, data_dir: Path, exporter: Path, die_with_parent: bool
    ) -> None:
        self.data_dir = data_dir
        self.process = ManagedProcess(
            "VM stand-in",
            [
                sys.executable,
                "-m",
                "devstack.vmstandin",
                "--kubeconfig",
                str(kubeconfig),
                "--data-dir",
                str(data_dir),
                "--exporter",
                str(exporter),
            ],
            log_path=data_dir / "vmstandin.log",
            die_with_parent=die_with_parent,
        )

    def start(self, *, timeout: float = 90.0) -> None:
        (self.data_dir / "ready").unlink(missing_ok=True)
        self.process.start()
        self.process.wait_until(
            (self.data_dir / "ready").exists, what="the CRDs and its watches", timeout=timeout
        )

    def stop(self) -> None:
        self.process.stop(timeout=60.0)
