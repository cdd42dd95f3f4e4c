"""Build an image (``images.recipe``): a bootable qcow2 and its sha256; and the manifest
that makes it a Harvester VirtualMachineImage (``manifest``).

The steps, each said on stderr as it starts and ends:

1. The Debian root, once for every version (``Recipe.debian_root``: mmdebstrap, as root),
   kept as a tarball in the cache under its digest.
2. The root of this image, unpacked from it: the PostgreSQL builds, the guest program
   as ``/usr/local/bin/dbi-bootstrap``, dbi's units (``images/files``), the network and
   cloud-init settings.
3. The disk: one ext4 filesystem labelled ``dbi-root`` over the whole disk (no partition
   table), booted by EXTLINUX from its first sector, then converted to a compressed qcow2.

A build happens in a scratch directory of the cache and appears under its final name
(``<name>-<digest>``) only when complete; builds serialize on a lock file. Each build
then removes the images and Debian roots that nothing used for five days, as Go trims
its build cache (``prune``).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dbi import names
from images import postgresql
from images.recipe import EXPORTER_PORT, FILES, GUEST, ROOT_LABEL, ROOT_SIZE, Recipe

DISK = "disk.qcow2"
TOOLS = ("mmdebstrap", "mkfs.ext4", "extlinux", "qemu-img", "mount", "umount", "tar")
KERNEL_ARGS = f"root=LABEL={ROOT_LABEL} rw console=ttyS0 net.ifnames=0 quiet"
UNITS = ("dbi-postgresql.service", "dbi-exporter.service")
UNUSED_SECONDS = 5 * 24 * 3600


class BuildFailed(RuntimeError):
    """A step of the build failed; the message names it and what the tool said."""


@dataclass(frozen=True)
class Image:
    recipe: Recipe
    directory: Path

    @property
    def disk(self) -> Path:
        return self.directory / DISK

    def describe(self) -> dict[str, object]:
        return dict(json.loads((self.directory / "image.json").read_text()))


def default_cache() -> Path:
    """Where images are kept between builds: ``$XDG_CACHE_HOME/dbi/images``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dbi" / "images"


def cached(recipe: Recipe, cache: Path) -> Image | None:
    """The built image of ``recipe``, marked used now (``prune`` keeps it), or None."""
    image = Image(recipe, cache / f"{recipe.name}-{recipe.digest()[:12]}")
    if not image.disk.exists():
        return None
    (image.directory / "image.json").touch()
    return image


def prune(cache: Path, *, now: float | None = None) -> list[Path]:
    """Remove the images and Debian roots nothing used for five days (an image is used
    when found built, a root when an image is built from it); return what went."""
    limit = (now if now is not None else time.time()) - UNUSED_SECONDS
    gone = []
    for marker in [*cache.glob("*/image.json"), *cache.glob("debian-*.tar")]:
        if marker.stat().st_mtime < limit:
            target = marker.parent if marker.name == "image.json" else marker
            if target.is_dir():
                shutil.rmtree(target)
            else:
                target.unlink()
            gone.append(target)
    return gone


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def build(
    recipe: Recipe,
    cache: Path,
    *,
    say: Callable[[str], None] | None = None,
    builds: Path | None = None,
) -> Image:
    """Return the image of ``recipe``, built into ``cache`` unless it is there already;
    the PostgreSQL builds are fetched into ``builds`` (default: ``cache/postgresql``)."""
    say = say or _stderr
    found = cached(recipe, cache)
    if found is not None:
        say(f"{recipe.name}: built already, {found.disk}")
        return found
    if os.geteuid() != 0:
        raise BuildFailed("building an image needs root (mmdebstrap --mode=root, a loop mount)")
    if lacking := missing_tools():
        raise BuildFailed(
            f"building an image needs {', '.join(lacking)} "
            "(apt-get install mmdebstrap e2fsprogs extlinux qemu-utils)"
        )
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached(recipe, cache)
        if found is not None:
            return found
        for stale in cache.glob(".building-*"):  # a build killed before it ended
            _unmount_under(stale)
            shutil.rmtree(stale, ignore_errors=True)
        image = _build(recipe, cache, say, builds or cache / "postgresql")
        for gone in prune(cache):
            say(f"removed {gone.name}: unused for five days")
        return image


def _build(recipe: Recipe, cache: Path, say: Callable[[str], None], builds: Path) -> Image:
    started = time.monotonic()
    base = _debian_root(recipe, cache, say)
    final = cache / f"{recipe.name}-{recipe.digest()[:12]}"
    with tempfile.TemporaryDirectory(dir=cache, prefix=".building-") as scratch:
        work = Path(scratch)
        root, out = work / "root", work / "out"
        root.mkdir()
        out.mkdir()
        with _step(say, "unpacking the Debian root"):
            _run(["tar", "--numeric-owner", "-xpf", str(base), "-C", str(root)])
        with _step(say, "installing PostgreSQL " + ", ".join(sorted(recipe.builds.values()))):
            _install_postgresql(recipe, root, builds)
        with _step(say, "installing dbi-bootstrap and dbi's units"):
            _install_dbi(recipe, root)
        raw = work / "disk.raw"
        with _step(say, f"making the {ROOT_SIZE} root filesystem and its boot loader"):
            _make_disk(root, raw, work / "mnt")
        with _step(say, "converting to a compressed qcow2"):
            _run(
                ["qemu-img", "convert", "-c", "-f", "raw", "-O", "qcow2", str(raw), str(out / DISK)]
            )
        raw.unlink()
        with _step(say, "writing the checksums"):
            digests = _checksums(out / DISK)
            (out / f"{DISK}.sha256").write_text(f"{digests['sha256']}  {DISK}\n")
            (out / "image.json").write_text(
                json.dumps(
                    {
                        "name": recipe.name,
                        "version": recipe.version,
                        "builds": {str(m): v for m, v in sorted(recipe.builds.items())},
                        "digest": recipe.digest(),
                        "sha256": digests["sha256"],
                        "sha512": digests["sha512"],
                        "bytes": (out / DISK).stat().st_size,
                        "build_seconds": round(time.monotonic() - started),
                    },
                    indent=2,
                )
                + "\n"
            )
        out.rename(final)
    say(f"{recipe.name}: {final / DISK} in {time.monotonic() - started:.0f} s")
    return Image(recipe, final)


def manifest(
    recipe: Recipe, sha512: str, *, url: str, namespace: str = "default"
) -> dict[str, object]:
    """The Harvester VirtualMachineImage that downloads the image from ``url`` (where
    the operator publishes the qcow2), labelled with the build dbi's preflight checks."""
    return {
        "apiVersion": "harvesterhci.io/v1beta1",
        "kind": "VirtualMachineImage",
        "metadata": {
            "name": recipe.name,
            "namespace": namespace,
            "labels": {names.IMAGE_VERSION_LABEL: recipe.version},
        },
        "spec": {
            "displayName": f"dbi PostgreSQL {recipe.version} ({recipe.digest()[:12]})",
            "sourceType": "download",
            "url": url,
            "checksum": sha512,
        },
    }


def _debian_root(recipe: Recipe, cache: Path, say: Callable[[str], None]) -> Path:
    tarball = cache / f"debian-{recipe.base_digest()[:12]}.tar"
    if tarball.exists():
        tarball.touch()  # used: ``prune`` keeps it
        return tarball
    partial = tarball.with_suffix(".partial.tar")
    partial.unlink(missing_ok=True)
    with _step(say, f"building the Debian root with mmdebstrap from {recipe.mirror}"):
        ran = subprocess.run(recipe.debian_root(partial), check=False)  # its progress shows
        if ran.returncode != 0:
            partial.unlink(missing_ok=True)
            raise BuildFailed(f"mmdebstrap exited {ran.returncode} (its output is above)")
    partial.rename(tarball)
    return tarball


def _install_postgresql(recipe: Recipe, root: Path, builds: Path) -> None:
    for major, version in sorted(recipe.builds.items()):
        bin_dir = postgresql.install(version, builds)
        target = root / "usr" / "lib" / "postgresql" / str(major)
        shutil.copytree(
            bin_dir.parent, target, symlinks=True, ignore=shutil.ignore_patterns("include")
        )


def _install_dbi(recipe: Recipe, root: Path) -> None:
    lib = root / "usr" / "local" / "lib" / "dbi" / "guest"
    lib.mkdir(parents=True)
    for source in GUEST.glob("*.py"):
        shutil.copy(source, lib / source.name)
    _copy(FILES / "dbi-bootstrap", root / "usr" / "local" / "bin" / "dbi-bootstrap", 0o755)
    for unit in UNITS:
        _copy(FILES / unit, root / "etc" / "systemd" / "system" / unit, 0o644)
    _copy(FILES / "99-dbi.cfg", root / "etc" / "cloud" / "cloud.cfg.d" / "99-dbi.cfg", 0o644)
    _copy(FILES / "interfaces", root / "etc" / "network" / "interfaces", 0o644)
    (root / "etc" / "fstab").write_text(
        f"LABEL={ROOT_LABEL} / ext4 defaults,errors=remount-ro 0 1\n"
    )
    (root / "var" / "lib" / "dbi").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "dbi").mkdir(mode=0o700, exist_ok=True)
    (root / "etc" / "dbi" / "image.json").write_text(
        json.dumps({"name": recipe.name, "version": recipe.version, "digest": recipe.digest()})
    )
    _run(["chroot", str(root), "systemctl", "enable", "--quiet", *UNITS])
    # Debian's own exporter unit would read as another user; dbi's runs instead.
    _run(["chroot", str(root), "systemctl", "mask", "--quiet", "prometheus-postgres-exporter"])
    assert EXPORTER_PORT == 9187, "images/files/dbi-exporter.service listens on 9187"


def _make_disk(root: Path, raw: Path, mnt: Path) -> None:
    kernels = sorted((root / "boot").glob("vmlinuz-*"))
    if not kernels:
        raise BuildFailed("the Debian root has no kernel in /boot")
    kernel = kernels[-1].name
    initrd = "initrd.img-" + kernel.removeprefix("vmlinuz-")
    extlinux = root / "boot" / "extlinux"
    extlinux.mkdir(parents=True, exist_ok=True)
    (extlinux / "extlinux.conf").write_text(
        "DEFAULT dbi\nPROMPT 0\nTIMEOUT 0\nLABEL dbi\n"
        f"  LINUX /boot/{kernel}\n  INITRD /boot/{initrd}\n  APPEND {KERNEL_ARGS}\n"
    )
    _run(
        ["mkfs.ext4", "-q", "-L", ROOT_LABEL, "-O", "^64bit", "-d", str(root), str(raw), ROOT_SIZE]
    )
    mnt.mkdir()
    _run(["mount", "-o", "loop", str(raw), str(mnt)])
    try:
        _run(["extlinux", "--install", str(mnt / "boot" / "extlinux")])
    finally:
        _run(["umount", str(mnt)])


def _unmount_under(directory: Path) -> None:
    """Unmount what a killed build left mounted under ``directory``."""
    for line in Path("/proc/self/mounts").read_text().splitlines():
        point = line.split()[1]
        if point.startswith(f"{directory}/"):
            subprocess.run(["umount", point], capture_output=True, check=False)


def _checksums(path: Path) -> dict[str, str]:
    sha256, sha512 = hashlib.sha256(), hashlib.sha512()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            sha256.update(chunk)
            sha512.update(chunk)
    return {"sha256": sha256.hexdigest(), "sha512": sha512.hexdigest()}


def _copy(source: Path, target: Path, mode: int) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, target)
    target.chmod(mode)


def _run(argv: list[str]) -> None:
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        said = (ran.stdout + ran.stderr).strip().splitlines()[-5:]
        raise BuildFailed(f"{argv[0]} exited {ran.returncode}: " + " | ".join(said))


class _step:
    """Say a step when it starts and how long it took when it ends."""

    def __init__(self, say: Callable[[str], None], what: str) -> None:
        self.say, self.what = say, what

    def __enter__(self) -> None:
        self.started = time.monotonic()
        self.say(f"{self.what} ...")

    def __exit__(self, kind: object, *_: object) -> None:
        if kind is None:
            self.say(f"{self.what}: done in {time.monotonic() - self.started:.0f} s")


def _stderr(line: str) -> None:
    print(f"image: {line}", file=sys.stderr, flush=True)
