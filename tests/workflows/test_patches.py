"""A run asks every patch at its start, before its first local activity
(workflows/patches.py, ``patches-at-start``): what it chose then holds for the run, on
replay too, wherever a pass asks again (tests/workflows/test_replay_under_queries.py
shows why on the real server)."""

from __future__ import annotations

import json

from temporalio.testing import WorkflowEnvironment

from dbi.messages import Wake
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World
from workflows import patches


def test_every_patch_is_asked_at_the_start() -> None:
    """A patch added to patches.py and left out of ASKED_AT_START would be asked where a
    pass needs it, after a local activity: the risk the gate removes."""
    defined = {
        value
        for name, value in vars(patches).items()
        if name.isupper() and isinstance(value, str) and name != "PATCHES_AT_START"
    }
    assert defined == set(patches.ASKED_AT_START)
    assert len(patches.ASKED_AT_START) == len(defined)


async def test_a_run_records_every_patch_before_its_first_local_activity(
    time_env: WorkflowEnvironment,
) -> None:
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await handle.signal("wake", Wake(reason="a change"))
        await settled(handle, 2)
        history = await handle.fetch_history()
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    kinds = [m.marker_name for m in markers]
    first_activity = kinds.index("core_local_activity")
    patched = [
        json.loads(m.details["patch-data"].payloads[0].data)["id"]
        for m in markers
        if m.marker_name == "core_patch"
    ]
    assert patched == [patches.PATCHES_AT_START, *patches.ASKED_AT_START]
    assert kinds[:first_activity] == ["core_patch"] * len(patched)
