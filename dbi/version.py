"""What `dbi --version` says: the release and the commit it was built from.

An image records the commit at build time (the Dockerfile's DBI_COMMIT, written to
``dbi/COMMIT`` before the wheel is made); a checkout of the repository reads it from
git, with ``-dirty`` when the work tree has changes; anything else says ``unknown``."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
RECORDED = HERE / "COMMIT"


def describe() -> str:
    return f"dbi {importlib.metadata.version('dbi')} (commit {commit()})"


def commit() -> str:
    if RECORDED.is_file() and (recorded := RECORDED.read_text().strip()):
        return recorded
    if not (HERE.parent / ".git").exists():  # installed, not a checkout
        return "unknown"
    try:
        head = _git("rev-parse", "--short=12", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return "unknown"
    return f"{head}-dirty" if dirty else head


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(HERE.parent), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=5,
    ).stdout.strip()
