"""The upgrade workflow's decisions on what it observed (plain data): which root disk
the old data boots on, whatever an earlier attempt changed, and a VM that does not
boot on the new one."""

from __future__ import annotations

from typing import Any

import pytest

from activities.operations import pgupgrade

NEW, OLD = "db-root-17aaaa", "db-root-16bbbb"


@pytest.mark.parametrize(
    ("booted", "roots", "old"),
    [
        pytest.param(OLD, {OLD: "i/p-16", NEW: "i/p-17"}, OLD, id="the-vm-still-boots-the-old"),
        pytest.param(NEW, {OLD: "i/p-16", NEW: "i/p-17"}, OLD, id="an-earlier-attempt-switched"),
        pytest.param(
            NEW,
            {OLD: "i/p-16", "db-root-15cccc": "i/p-15", NEW: "i/p-17"},
            OLD,
            id="several-left-the-old-majors-image",
        ),
        pytest.param(NEW, {NEW: "i/p-17"}, None, id="none-left"),
        pytest.param(None, {OLD: "i/p-16", NEW: "i/p-17"}, OLD, id="no-vm-read"),
    ],
)
def test_the_old_root_is_never_the_new_one(
    booted: str | None, roots: dict[str, str | None], old: str | None
) -> None:
    found = pgupgrade.old_root(booted=booted, new_root=NEW, roots=roots, old_image="i/p-16")
    assert found == old
    assert found != NEW


def vm(root: str, status: str) -> dict[str, Any]:
    volumes = [{"name": "root", "persistentVolumeClaim": {"claimName": root}}]
    template = {"spec": {"volumes": volumes}}
    return {"spec": {"template": template}, "status": {"printableStatus": status}}


@pytest.mark.parametrize(
    ("found", "failing"),
    [
        pytest.param(vm(NEW, "CrashLoopBackOff"), True, id="crash-looping-on-the-new-root"),
        pytest.param(vm(NEW, "Starting"), False, id="starting"),
        pytest.param(vm(NEW, "Running"), False, id="running-pg-upgrade"),
        pytest.param(vm(OLD, "CrashLoopBackOff"), False, id="not-yet-pointed-at-it"),
        pytest.param(None, False, id="no-vm"),
    ],
)
def test_a_vm_that_does_not_boot_on_the_new_root_is_said_so(
    found: dict[str, Any] | None, failing: bool
) -> None:
    said = pgupgrade.boot_failure(found, NEW)
    assert (said is not None) is failing
    if said is not None:
        assert NEW in said and "CrashLoopBackOff" in said
