"""The lock files that every install of dbi's dependencies reads, made from
pyproject.toml by uv (``uv pip compile``)::

    python -m devstack.lock              # after changing a dependency in pyproject.toml
    python -m devstack.lock --upgrade    # every package to its newest allowed version

- ``requirements/dev.lock``: the dev extra (dbi[worker] and the tools the tests use),
  what ``./dev`` (so CI) installs.
- ``requirements/worker.lock``: dbi[worker], what the image runs, and the SBOM tool its
  build stage runs; compiled with dev.lock as constraints, so each version in it is the
  one the tests ran.

Both are universal (any platform, any Python dbi supports) and carry the sha256 of
every file a version has on the index: pip installs them with ``--require-hashes``.
Without ``--upgrade``, uv keeps the versions a lock already names. Dev tooling."""

from __future__ import annotations

import subprocess
import sys

from devstack import tools

DEV = "requirements/dev.lock"
WORKER = "requirements/worker.lock"
# What the image's build stage runs besides dbi[worker] (Dockerfile).
IMAGE_BUILD = "requirements/image-build.in"
COMMON = (
    "--universal",
    "--generate-hashes",
    "--python-version=3.11",
    "--custom-compile-command=python -m devstack.lock",
    "--quiet",
)


def compile_locks(*extra: str) -> None:
    uv = str(tools.venv_tool("uv"))
    for target, inputs in (
        (DEV, ["pyproject.toml", "--extra=dev"]),
        (WORKER, ["pyproject.toml", IMAGE_BUILD, "--extra=worker", f"--constraint={DEV}"]),
    ):
        print(f"==> {target}", file=sys.stderr, flush=True)
        subprocess.run(
            [uv, "pip", "compile", *inputs, *COMMON, *extra, f"--output-file={target}"],
            cwd=tools.REPO_ROOT,
            check=True,
        )


if __name__ == "__main__":
    compile_locks(*(["--upgrade"] if "--upgrade" in sys.argv[1:] else []))
