"""A watcher as a process of its own (one replica of several)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack.stack import StackInfo

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}


@contextmanager
def watcher_process(
    local_stack: StackInfo, namespace: str, log: Path, **env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``python -m watcher`` for one namespace; kill it on exit."""
    environment = {
        **os.environ,
        "KUBECONFIG": local_stack.kubeconfig,
        "TEMPORAL_ADDRESS": local_stack.temporal_address,
        "DBI_WATCH_NAMESPACES": namespace,
        **env,
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "watcher"], env=environment, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
