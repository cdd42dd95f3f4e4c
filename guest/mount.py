"""The data disk: found, formatted on first use only, and mounted where the data lives.

A VM has a root disk (the image), a data disk (the instance's claim) and the cloud-init
disk. The data disk is found by its filesystem label (``dbi-data``) once formatted. A
first boot finds it by elimination: the one whole disk of a VM's kinds (virtio, SCSI,
NVMe) that is not mounted, not partitioned and holds no signature at all (``blkid -p``
finds none). It is formatted then, and only then; a disk that holds anything, or more
than one blank disk, stops the boot with what was found: guessing could format data.
Before it is mounted, its filesystem grows to the disk's size (a claim expanded since
the last boot).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

LABEL = "dbi-data"
# The whole disks a VM's data disk may be (never zram, loop or optical devices).
VM_DISKS = re.compile(r"^(vd[a-z]+|sd[a-z]+|xvd[a-z]+|nvme\d+n\d+)$")


@dataclass(frozen=True, kw_only=True)
class Device:
    """A block device as lsblk lists it."""

    path: str
    name: str
    type: str
    label: str | None = None
    mountpoint: str | None = None
    partitioned: bool = False
    read_only: bool = False


class NoDataDisk(RuntimeError):
    """The data disk cannot be told apart safely; the message says what was found."""


def listed() -> list[Device]:
    """The block devices, from ``lsblk``."""
    ran = subprocess.run(
        ["lsblk", "--json", "--output", "NAME,PATH,TYPE,LABEL,MOUNTPOINT,RO"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [
        Device(
            path=d["path"],
            name=d["name"],
            type=d["type"],
            label=d.get("label"),
            mountpoint=d.get("mountpoint"),
            partitioned=bool(d.get("children")),
            read_only=bool(d.get("ro")),
        )
        for d in json.loads(ran.stdout)["blockdevices"]
    ]


def probe(path: str) -> dict[str, str]:
    """What ``blkid`` finds on ``path`` when it reads the device itself (not a cache):
    its filesystem's TYPE and LABEL, a partition table's PTTYPE, ...; {} when it finds
    no signature at all (exit code 2)."""
    ran = subprocess.run(
        ["blkid", "-p", "-o", "export", path], capture_output=True, text=True, check=False
    )
    if ran.returncode not in (0, 2):
        raise NoDataDisk(f"blkid could not probe {path}: {ran.stderr.strip()}")
    return dict(line.split("=", 1) for line in ran.stdout.splitlines() if "=" in line)


def choose(devices: list[Device], is_blank: dict[str, bool]) -> tuple[str, bool]:
    """The data disk's path and whether it must be formatted (pure): the one labelled
    ``dbi-data``, else the one blank candidate; ``NoDataDisk`` otherwise."""
    labelled = [d for d in devices if d.label == LABEL]
    if len(labelled) == 1:
        return labelled[0].path, False
    if labelled:
        raise NoDataDisk(f"{len(labelled)} disks are labelled {LABEL}: {_paths(labelled)}")
    candidates = [
        d
        for d in devices
        if d.type in {"disk", "loop"} and not d.read_only and not d.mountpoint and not d.partitioned
    ]
    empty = [d for d in candidates if is_blank[d.path]]
    if len(empty) == 1:
        return empty[0].path, True
    held = [d for d in candidates if not is_blank[d.path]]
    said = f"blank: {_paths(empty) or 'none'}; holding data, not dbi's: {_paths(held) or 'none'}"
    raise NoDataDisk(f"no disk is labelled {LABEL} and not exactly one is blank ({said})")


def ensure(target: Path, *, only: list[str] | None = None) -> str:
    """Mount the data disk at ``target`` (formatting it first when blank); return its
    device. ``only``: the devices to consider (default: the VM's whole disks)."""
    devices = []
    found: dict[str, bool] = {}
    for d in listed():
        if only is not None and d.path not in only:
            continue
        if only is None and not VM_DISKS.match(d.name):
            continue
        signature = probe(d.path)
        devices.append(replace(d, label=signature.get("LABEL")))
        found[d.path] = not signature
    path, fresh = choose(devices, found)
    if fresh:
        _run(["mkfs.ext4", "-q", "-L", LABEL, "-m", "0", path])  # no -F: it refuses a filesystem
    target.mkdir(parents=True, exist_ok=True)
    if not _mounted(target):
        grow(path)
        _run(["mount", "-o", "noatime", path, str(target)])
    return path


def grow(path: str) -> None:
    """Grow the unmounted filesystem on ``path`` to the disk's size when the disk is
    larger (a claim expanded since the last boot): checked first, as resize2fs asks."""
    disk = int(_out(["blockdev", "--getsize64", path]))
    header = dict(
        line.split(":", 1) for line in _out(["dumpe2fs", "-h", path]).splitlines() if ":" in line
    )
    filesystem = int(header["Block count"]) * int(header["Block size"])
    if disk - filesystem < 1 << 20:
        return
    checked = subprocess.run(
        ["e2fsck", "-f", "-p", path], capture_output=True, text=True, check=False
    )
    if checked.returncode > 1:  # 1: errors corrected
        raise NoDataDisk(f"e2fsck exited {checked.returncode} on {path}: {checked.stdout.strip()}")
    _run(["resize2fs", path])


def _mounted(target: Path) -> bool:
    return subprocess.run(["mountpoint", "-q", str(target)], check=False).returncode == 0


def _paths(devices: list[Device]) -> str:
    return ", ".join(d.path for d in devices)


def _out(argv: list[str]) -> str:
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        raise NoDataDisk(f"{argv[0]} exited {ran.returncode}: {ran.stderr.strip()}")
    return ran.stdout


def _run(argv: list[str]) -> None:
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        raise NoDataDisk(f"{argv[0]} exited {ran.returncode}: {ran.stderr.strip()}")
