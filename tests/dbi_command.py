"""Run the ``dbi`` command line against the test stack, as an operator does."""

from __future__ import annotations

import os
import subprocess

from devstack import tools
from devstack.stack import StackInfo


def dbi(local_stack: StackInfo, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``dbi ARGS`` with the stack's admin kubeconfig and Temporal, plus ``env``."""
    return subprocess.run(
        [str(tools.venv_tool("dbi")), *args],
        env={
            **os.environ,
            "KUBECONFIG": local_stack.kubeconfig,
            "TEMPORAL_ADDRESS": local_stack.temporal_address,
            **env,
        },
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
