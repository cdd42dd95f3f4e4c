"""Which VMs the stand-in's resync looks at again (plain data): the guests share the
orchestrator's cores here, so a VM running as it should is left alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pytest

from devstack.vmstandin.controller import VM, needs_look
from devstack.vmstandin.guest import Guest as RealGuest


@dataclass
class Guest:
    up: bool

    def running(self) -> bool:
        return self.up


def vm(strategy: str, version: str = "7") -> dict[str, Any]:
    return {"metadata": {"resourceVersion": version}, "spec": {"runStrategy": strategy}}


@pytest.mark.parametrize(
    ("listed", "version", "guest", "ready", "look"),
    [
        pytest.param(vm("Always"), None, None, False, True, id="never-reconciled"),
        pytest.param(vm("Always", "8"), "7", Guest(up=True), True, True, id="changed-since"),
        pytest.param(vm("Always"), "7", Guest(up=True), False, True, id="booting"),
        pytest.param(vm("Always"), "7", Guest(up=False), True, True, id="guest-died"),
        pytest.param(vm("Always"), "7", Guest(up=False), False, True, id="not-started"),
        pytest.param(vm("Halted"), "7", Guest(up=True), True, True, id="should-stop"),
        pytest.param(vm("Always"), "7", Guest(up=True), True, False, id="running-settled"),
        pytest.param(vm("Halted"), "7", Guest(up=False), False, False, id="stopped-settled"),
    ],
)
def test_the_resync_looks_at_a_vm_only_when_something_may_have_changed(
    listed: dict[str, Any], version: str | None, guest: Guest | None, ready: bool, look: bool
) -> None:
    state = (
        None
        if guest is None
        else VM(guest=cast(RealGuest, guest), version=version, ready_seen=ready)
    )
    assert needs_look(listed, state) is look
