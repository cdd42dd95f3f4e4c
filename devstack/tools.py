"""Find the programs the local stack runs: wheels in the virtual environment, and Go."""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

from devstack.process import StackError

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = REPO_ROOT / ".cache" / "devstack"


def venv_tool(name: str) -> Path:
    """Return the path of a program installed by a wheel of the dev extra.

    The programs (``temporal``, ``temporal-test-server``, ``kubectl``) live beside the
    interpreter, so a system-wide copy of another version is never picked up.
    """
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise StackError(
            f"{name} is not installed beside {sys.executable}; "
            "install the dev extra (./dev does it: pip install -e '.[dev]')"
        )
    return path


def go() -> str:
    """Return the path of the Go toolchain that builds the control plane."""
    found = shutil.which("go")
    if found is None:
        raise StackError("the Go toolchain (go) is not on PATH; it builds the control plane")
    return found


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_is_free(port: int) -> bool:
    """Tell whether a TCP port on 127.0.0.1 can be bound now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
