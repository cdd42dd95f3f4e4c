"""Build a Go program of this repository into a git-ignored cache, once per source.

The binary is keyed by a digest of the program's source, its pinned modules and the Go
version, so it is rebuilt only when one of them changes. Concurrent callers (a test run
and ``dbi dev up``) serialize on a lock file; a binary appears under its final name only
when complete, and older builds of the same program are removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

from devstack import tools
from devstack.process import StackError


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def source_digest(source_dir: Path, ldflags: str = "") -> str:
    """Return a digest of the program's source, pinned modules, Go version and the
    linker flags it is built with."""
    h = hashlib.sha256(ldflags.encode())
    for path in sorted([*source_dir.glob("*.go"), source_dir / "go.mod", source_dir / "go.sum"]):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    version = subprocess.run([tools.go(), "version"], capture_output=True, text=True, check=True)
    h.update(version.stdout.encode())
    return h.hexdigest()[:16]


def build(
    source_dir: Path,
    name: str,
    *,
    what: str,
    package: str = ".",
    ldflags: str = "",
    cache_dir: Path = tools.CACHE_DIR,
) -> Path:
    """Return the binary ``name`` built from ``source_dir`` (its ``package``: the
    module's own main package, or a program of a module its go.mod pins; ``ldflags``
    given to the linker), building it first if the cache lacks it (``what`` names it in
    the progress lines)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    binary = cache_dir / f"{name}-{source_digest(source_dir, ldflags)}"
    if binary.exists():
        return binary
    with (cache_dir / f".{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if binary.exists():
            return binary
        _go_build(source_dir, package, ldflags, binary, what)
    for old in cache_dir.glob(f"{name}-*"):
        if old != binary:
            old.unlink(missing_ok=True)
    return binary


def _go_build(source_dir: Path, package: str, ldflags: str, binary: Path, what: str) -> None:

    partial = binary.with_suffix(".partial")
    _stderr(
        f"building {what} from {source_dir} (first time: module download and compile take a while)"
    )
    started = time.monotonic()
    proc = subprocess.Popen(
        [
            tools.go(),
            "build",
            "-v",
            "-trimpath",
            f"-ldflags={ldflags}",
            "-o",
            str(partial),
            package,
        ],
        cwd=source_dir,
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
            _stderr(f"  {compiled} packages compiled, {time.monotonic() - started:.0f}s")
    if proc.wait() != 0:
        raise StackError(f"building {what} failed:\n" + "".join(output[-40:]))
    partial.rename(binary)
    size = binary.stat().st_size / 2**20
    _stderr(f"{what} built in {time.monotonic() - started:.0f}s ({size:.0f} MiB)")
