"""A boot of one instance's VM, as a process and as a real VM: ``python -m bench.guest_boot
[--version 18.6.0] [--repave 18.x] [--upgrade 19.x] [--repeat 3]``.

For one bootstrap document (TLS, an admin verifier): the process-mode guest's boot
(``dbi-bootstrap`` then PostgreSQL, until it answers) and qemu's boot of dbi's image
(built first when missing: its build time and size are printed) on a fresh data disk,
then a restart of it on the same disks; with ``--repave``, a boot of the same disks on
that build's image (a minor repave), and with ``--upgrade``, on that major's image
with the document's upgrade (pg_upgrade inside the VM). For each qemu boot: the VM's
floor (kernel, initramfs and systemd up: cloud-init's first stage starts, on its
console), PostgreSQL answering (an SSLRequest answered), and the ACPI shutdown that
ends it; a repave's or an upgrade's downtime in the VM is its shutdown plus its boot.
Medians over ``--repeat``; CPU-seconds are qemu's. No stack: the stand-in's guests are
driven directly, so the orchestrator's part is left out.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from pydantic import SecretStr

from dbi import bootstrap, scram, tls
from devstack import postgresql, tools
from devstack.vmstandin.guest import Guest
from devstack.vmstandin.kubevirt import Size
from devstack.vmstandin.qemu import Caches, QemuGuest
from images import build as images
from images.postgresql import major_of
from images.recipe import Recipe

SLOW_SHUTDOWN = 15.0  # seconds: a shutdown this slow keeps the VM's console
SIZE = Size(
    sockets=2, cores=1, threads=1, max_sockets=2, memory_bytes=1 << 30, max_memory_bytes=1 << 30
)


def document() -> bootstrap.Bootstrap:
    ca = tls.new_ca("bench")
    pair = tls.issue(ca, tls.service_names("bench", "db"))
    return bootstrap.Bootstrap(
        admin_verifier=scram.verifier("bench-password"),
        server_cert=pair.cert_pem,
        server_key=SecretStr(pair.key_pem),
    )


def until(check: Callable[[], bool], timeout: float = 600) -> float:
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise TimeoutError("the guest did not answer")
        time.sleep(0.2)
    return time.monotonic() - started


def systemd_up(console: Path, offset: int) -> bool:
    """Whether this boot (the console after ``offset``) reached cloud-init's first stage:
    kernel, initramfs and systemd are up, and nothing of the image's own work has run."""
    return console.exists() and b"running 'init-local'" in console.read_bytes()[offset:]


def process_boot(version: str, work: Path) -> float:
    guest = Guest(
        disk=work / "disk", address="127.0.9.10", log_path=work / "pg.log", version=version
    )
    started = time.monotonic()
    try:
        guest.prepare(document(), SIZE)
        guest.boot(SIZE)
        until(guest.ready)
        return time.monotonic() - started
    finally:
        guest.stop()


def qemu_boots(
    version: str, work: Path, *, repave: str | None, upgrade: str | None
) -> dict[str, float]:
    console = work / "console.log"
    guest = QemuGuest(
        disk=work / "vm",
        address="127.0.9.11",
        log_path=console,
        version=version,
        caches=Caches(images=images.default_cache(), builds=tools.CACHE_DIR),
    )
    doc = document()
    boots: list[tuple[str, str, bootstrap.Bootstrap]] = [
        ("first", version, doc),
        ("restart", version, doc),
    ]
    if repave:
        boots.append(("repave", repave, doc))
    if upgrade:
        run = bootstrap.Upgrade(
            from_major=major_of(repave or version),
            to_major=major_of(upgrade),
            token="bench-upgrade",  # noqa: S106 (names the upgrade; not a secret)
        )
        boots.append(("upgrade", upgrade, doc.model_copy(update={"upgrade": run})))
    said: dict[str, float] = {}
    try:
        for boot, build, sent in boots:
            guest.use(build)
            guest.prepare(sent, SIZE)
            offset = console.stat().st_size if console.exists() else 0
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
            started = time.monotonic()
            guest.boot(SIZE)
            said[f"{boot} floor"] = until(partial(systemd_up, console, offset))
            until(guest.ready)
            said[f"{boot} answers"] = time.monotonic() - started
            stopping = time.monotonic()
            guest.stop()
            said[f"{boot} shutdown"] = shutdown = time.monotonic() - stopping
            if shutdown > SLOW_SHUTDOWN:
                kept = Path(tempfile.gettempdir()) / f"dbi-bench-{boot}-{int(time.time())}.log"
                shutil.copy(console, kept)
                print(f"{boot}: the shutdown took {shutdown:.0f} s; console in {kept}")
            said[f"{boot} qemu cpu-s"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu
    finally:
        guest.stop()
    return said


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.guest_boot", description=__doc__)
    parser.add_argument("--version", default=postgresql.VERSION, help="the PostgreSQL build")
    parser.add_argument("--repave", help="a later build of the same major, booted next")
    parser.add_argument("--upgrade", help="a build of a later major, upgraded to last")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    for build in filter(None, (args.version, args.repave, args.upgrade)):
        image = images.build(Recipe(build), images.default_cache(), builds=tools.CACHE_DIR)
        built = image.describe()
        size = int(str(built["bytes"])) >> 20
        print(f"image {image.disk}: {size} MiB, built in {built['build_seconds']} s")
    runs: dict[str, list[float]] = {}
    for i in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="dbi-bench-boot-") as scratch:
            work = Path(scratch)
            runs.setdefault("process answers", []).append(process_boot(args.version, work))
            booted = qemu_boots(args.version, work, repave=args.repave, upgrade=args.upgrade)
            for what, seconds in booted.items():
                runs.setdefault(what, []).append(seconds)
        print(
            f"run {i + 1}/{args.repeat}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in runs.items()),
            file=sys.stderr,
        )
    print("| boot | median s | runs |\n|---|---|---|")
    for what, values in runs.items():
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {what} | {statistics.median(values):.1f} | {each} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
