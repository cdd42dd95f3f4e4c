"""What a pass records in its workflow's history: the commands a replay must find.

A new run records the markers of the patches since the baseline (release 0.1.0:
docs/engine.md, Changing workflow code) before anything else, with the
TemporalChangeVersion upsert the SDK adds for each; its first pass is two local
activities (the load, then the steps and the status in one), a woken pass that finds
the instance as the last did one (the load, the steps and the status)."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from dbi.messages import Wake
from tests.history import local_activity_type
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World
from workflows.state import HISTORY_TALLY, SETTINGS_STEP


async def test_a_new_run_records_its_passes_as_local_activities_only(
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
    assert [m.marker_name for m in markers] == ["core_patch"] * 2 + ["core_local_activity"] * 3
    assert HISTORY_TALLY in str(markers[0].details)
    assert SETTINGS_STEP in str(markers[1].details)
    assert [local_activity_type(m) for m in markers[2:]] == [
        pipeline.LOAD_INSTANCE,
        pipeline.RUN_PASS,
        pipeline.LOAD_AND_RUN_PASS,
    ]
    versions = [
        e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
        and "TemporalChangeVersion"
        in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]
    assert len(versions) == 2
    assert HISTORY_TALLY in str(versions[0]["TemporalChangeVersion"])
    assert SETTINGS_STEP in str(versions[1]["TemporalChangeVersion"])
    # Every step of the convergence ran, in both passes.
    ran = [name for name, _ in world.calls]
    assert all(ran.count(s.name) == 2 for s in pipeline.CONVERGE), ran
