"""``dbi-bootstrap``: prepare the data disk for this boot (``guest.boot.prepare``).

cloud-init runs it at every boot (``bootcmd``); it reads the document the orchestrator
wrote from the seed disk (``guest.seed``), else ``/etc/dbi/bootstrap.json``. PostgreSQL
starts after it, on the data directory and with the major's binaries it prints as one
JSON line on stdout, and for the image's units as shell variables in
``files.ENV_FILE``. The defaults are an image's (Debian's layout); the local stack's
stand-in passes its own.

It first mounts the data disk (``guest.mount``: found by its label, formatted on first
use only). Exit codes: 0 prepared; 1 a part of the boot failed (what it said is on
stderr, the data untouched or kept); 2 the document cannot be read (the field is
named).
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import sys
from pathlib import Path

from guest import boot, disk, files, mount, seed
from guest.document import Document, Invalid, parse, read

DISK = "/var/lib/dbi"
BINARIES = Path("/usr/lib/postgresql")  # <major>/bin, as Debian installs them


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        doc, source = _document(args.document)
    except Invalid as e:
        print(f"dbi-bootstrap: {e}", file=sys.stderr)
        return 2
    binaries = dict(args.binaries) if args.binaries else _installed()
    if not binaries:
        print("dbi-bootstrap: no PostgreSQL binaries found", file=sys.stderr)
        return 1
    user = pwd.getpwnam(args.user) if os.geteuid() == 0 else pwd.getpwuid(os.geteuid())
    host = disk.Host(
        binaries=binaries,
        user=(user.pw_uid, user.pw_gid) if os.geteuid() == 0 else None,
        login=user.pw_name,
    )
    size = boot.Size(
        cpus=args.cpus or os.cpu_count() or 1, memory_bytes=args.memory_bytes or _memory()
    )
    try:
        if args.mount:
            mount.ensure(Path(args.disk))
        booted = boot.prepare(
            doc, Path(args.disk), host, image_major=args.image_major or max(binaries), size=size
        )
    except (OSError, RuntimeError) as e:  # NoDataDisk too: nothing was formatted
        print(f"dbi-bootstrap: {e}", file=sys.stderr)
        return 1
    said = {
        "document": source,
        "pgdata": str(booted.pgdata),
        "major": booted.major,
        "bin": str(binaries[booted.major]),
        "initialized": booted.initialized,
        "reset": booted.reset,
        "upgrade": booted.upgrade,
    }
    if args.env_file:
        _write_env(Path(args.env_file), said, doc.admin_user)
    print(json.dumps(said), flush=True)
    return 0


def _write_env(path: Path, said: dict[str, object], admin_user: str) -> None:
    """What the image's PostgreSQL and exporter units start with (``files.ENV_FILE``),
    written whole or not at all: without it they do not start."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(
        f"PGBIN={said['bin']}\nPGDATA={said['pgdata']}\nDBI_ADMIN_USER={admin_user}\n"
    )
    partial.rename(path)


def _document(path: str | None) -> tuple[Document, str]:
    """The document at ``path``; without one, the seed disk's (``guest.seed``), else
    cloud-init's copy at /etc/dbi/bootstrap.json."""
    if path is None:
        raw = seed.read()
        if raw is not None:
            return parse(raw), "seed"
        path = files.DOCUMENT
    return read(Path(path)), path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dbi-bootstrap", description="Prepare the data disk for this boot."
    )
    parser.add_argument(
        "document",
        nargs="?",
        help="the bootstrap document (default: the seed disk's, else " + files.DOCUMENT + ")",
    )
    parser.add_argument("--disk", default=DISK, help="where the data disk is mounted")
    parser.add_argument(
        "--mount",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="find, format on first use only, and mount the data disk at --disk "
        "(default; --no-mount: --disk is a directory already in place)",
    )
    parser.add_argument(
        "--binaries",
        action="append",
        type=_binaries,
        metavar="MAJOR=DIR",
        help="a major's bin directory (repeat; default: /usr/lib/postgresql/*/bin)",
    )
    parser.add_argument(
        "--image-major", type=int, help="the major this image boots (default: the newest)"
    )
    parser.add_argument("--user", default="postgres", help="PostgreSQL's user (when root)")
    parser.add_argument(
        "--env-file",
        default=files.ENV_FILE,
        help="where to write what the PostgreSQL unit starts with (default: %(default)s; "
        "an empty value writes none)",
    )
    parser.add_argument("--cpus", type=int, help="the VM's CPUs (default: this machine's)")
    parser.add_argument("--memory-bytes", type=int, help="the VM's memory (default: /proc)")
    return parser


def _binaries(value: str) -> tuple[int, Path]:
    major, _, path = value.partition("=")
    if not major.isdigit() or not path:
        raise argparse.ArgumentTypeError(f"{value!r} is not MAJOR=DIR")
    return int(major), Path(path)


def _installed() -> dict[int, Path]:
    """The majors installed as Debian installs them: /usr/lib/postgresql/<major>/bin."""
    found = {}
    for bin_dir in BINARIES.glob("*/bin"):
        if bin_dir.parent.name.isdigit() and (bin_dir / "postgres").exists():
            found[int(bin_dir.parent.name)] = bin_dir
    return found


def _memory() -> int:
    """This machine's memory, from /proc/meminfo (MemTotal, kB)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


if __name__ == "__main__":
    sys.exit(main())
