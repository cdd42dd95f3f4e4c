"""Two local stacks on one machine (parallel test sessions) never hand two VMs one
loopback address, also in the seconds before either guest listens."""

from __future__ import annotations

from pathlib import Path

from devstack.vmstandin.addresses import Addresses


def test_two_stand_ins_give_their_first_vms_different_addresses(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = Addresses(tmp_path / "a" / "addresses.json")
    second = Addresses(tmp_path / "b" / "addresses.json")
    try:
        # Nothing listens on either address yet: only the ranges keep them apart.
        assert first.of("vm-1") != second.of("vm-1")
        assert first.range != second.range
    finally:
        first.close()
        second.close()


def test_a_restarted_stand_in_keeps_its_range_and_its_vms_addresses(tmp_path: Path) -> None:
    path = tmp_path / "addresses.json"
    before = Addresses(path)
    address = before.of("vm-1")
    before.close()
    after = Addresses(path)
    try:
        assert after.range == before.range
        assert after.of("vm-1") == address
        assert after.of("vm-2") != address
    finally:
        after.close()
