"""Run the ``dbi`` command line against the test stack, as an operator does."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence

from devstack import tools
from devstack.stack import StackInfo


def dbi(
    local_stack: StackInfo, *args: str, program: Sequence[str] = (), **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``dbi ARGS`` (or ``program ARGS``) with the stack's admin kubeconfig and
    Temporal, plus ``env``."""
    return subprocess.run(
        [*(program or [str(tools.venv_tool("dbi"))]), *args],
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
