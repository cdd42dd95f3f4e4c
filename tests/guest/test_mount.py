"""The data disk is found by its label, or as the one blank disk on a first boot, and
formatted then only: a disk that holds anything is never formatted (plain data, then
real block devices: loop devices over files)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from guest import mount
from guest.mount import LABEL, Device, NoDataDisk, choose


def disk(path: str, **fields: object) -> Device:
    return Device(path=path, name=path.rsplit("/", 1)[-1], type="disk", **fields)  # type: ignore[arg-type]


ROOT = disk("/dev/vda", mountpoint="/")


@pytest.mark.parametrize(
    ("devices", "blank", "chosen"),
    [
        pytest.param([ROOT, disk("/dev/vdb", label=LABEL)], {}, ("/dev/vdb", False), id="label"),
        pytest.param(
            [ROOT, disk("/dev/vdb"), disk("/dev/vdc", label="cidata")],
            {"/dev/vdb": True, "/dev/vdc": False},
            ("/dev/vdb", True),
            id="the-one-blank",
        ),
        pytest.param(
            [ROOT, disk("/dev/vdb", label=LABEL), disk("/dev/vdc")],
            {"/dev/vdc": True},
            ("/dev/vdb", False),
            id="label-over-blank",
        ),
    ],
)
def test_the_data_disk_is_the_labelled_one_or_the_one_blank_one(
    devices: list[Device], blank: dict[str, bool], chosen: tuple[str, bool]
) -> None:
    assert choose(devices, {ROOT.path: False, **blank}) == chosen


@pytest.mark.parametrize(
    ("devices", "blank", "said"),
    [
        pytest.param(
            [ROOT, disk("/dev/vdb"), disk("/dev/vdc")],
            {"/dev/vdb": True, "/dev/vdc": True},
            "blank: /dev/vdb, /dev/vdc",
            id="two-blank",
        ),
        pytest.param(
            [ROOT, disk("/dev/vdb")],
            {"/dev/vdb": False},
            "holding data, not dbi's: /dev/vdb",
            id="only-someones-data",
        ),
        pytest.param(
            [ROOT, disk("/dev/vdb", partitioned=True), disk("/dev/vdc", read_only=True)],
            {"/dev/vdb": True, "/dev/vdc": True},
            "blank: none",
            id="partitioned-or-read-only",
        ),
        pytest.param(
            [disk("/dev/vdb", label=LABEL), disk("/dev/vdc", label=LABEL)],
            {},
            "2 disks are labelled",
            id="two-labelled",
        ),
    ],
)
def test_a_disk_that_cannot_be_told_apart_stops_the_boot(
    devices: list[Device], blank: dict[str, bool], said: str
) -> None:
    with pytest.raises(NoDataDisk, match=said):
        choose(devices, {ROOT.path: False, **blank})


@pytest.fixture
def loops(tmp_path: Path) -> Iterator[list[str]]:
    """Two 32 MiB loop devices over files: the first holds someone's ext4 filesystem
    with a file on it, the second is blank."""
    made: list[str] = []
    try:
        for name in ("someones", "blank"):
            image = tmp_path / f"{name}.img"
            subprocess.run(["truncate", "-s", "32M", str(image)], check=True)
            if name == "someones":
                subprocess.run(["mkfs.ext4", "-q", "-L", name, str(image)], check=True)
            found = subprocess.run(
                ["losetup", "--find", "--show", str(image)],
                capture_output=True,
                text=True,
                check=True,
            )
            made.append(found.stdout.strip())
        assert mount.probe(made[1]) == {}, "the blank loop device probes as holding something"
        yield made
    finally:
        for target in tmp_path.glob("mnt-*"):
            subprocess.run(["umount", str(target)], capture_output=True, check=False)
        for device in made:
            subprocess.run(["losetup", "--detach", device], check=False)


def label_of(device: str) -> str:
    return subprocess.run(
        ["blkid", "-p", "-s", "LABEL", "-o", "value", device],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()


def test_a_first_boot_formats_the_blank_disk_and_never_the_one_holding_data(
    loops: list[str], tmp_path: Path
) -> None:
    someones, blank = loops
    target = tmp_path / "mnt-data"
    assert mount.ensure(target, only=loops) == blank
    assert (label_of(blank), label_of(someones)) == (LABEL, "someones")
    (target / "rows").write_text("42")
    subprocess.run(["umount", str(target)], check=True)
    assert mount.ensure(target, only=loops) == blank  # found by its label, not formatted
    assert (target / "rows").read_text() == "42"


def test_with_no_blank_disk_nothing_is_formatted(loops: list[str], tmp_path: Path) -> None:
    someones = loops[0]
    with pytest.raises(NoDataDisk, match=f"holding data, not dbi's: {someones}"):
        mount.ensure(tmp_path / "mnt-data", only=[someones])
    assert label_of(someones) == "someones"


def test_a_disk_that_grew_gets_a_filesystem_as_large_at_the_next_boot(
    loops: list[str], tmp_path: Path
) -> None:
    blank = loops[1]
    target = tmp_path / "mnt-data"
    mount.ensure(target, only=loops)
    (target / "rows").write_text("42")
    before = os.statvfs(target).f_blocks * os.statvfs(target).f_frsize
    subprocess.run(["umount", str(target)], check=True)
    backing = subprocess.run(
        ["losetup", "--noheadings", "--output", "BACK-FILE", blank],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    subprocess.run(["truncate", "-s", "64M", backing], check=True)  # the claim expanded
    subprocess.run(["losetup", "--set-capacity", blank], check=True)
    mount.ensure(target, only=loops)
    after = os.statvfs(target).f_blocks * os.statvfs(target).f_frsize
    assert after > before * 1.8, (before, after)
    assert (target / "rows").read_text() == "42"
