"""A run asks every patch at its start, before its first local activity
(workflows/patches.py, ``patches-at-start``): what it chose then holds for the run, on
replay too, wherever a pass asks again (tests/workflows/test_replay_under_queries.py
shows why on the real server). A new run asks one, ``folded-patches``, which stands for
all of them; runs begun before it replay from the histories in histories/
(test_replay.py)."""

from __future__ import annotations

import json

from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from dbi.messages import Wake
from tests.history import local_activity_type
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World
from workflows import patches


def test_every_patch_is_asked_at_the_start() -> None:
    """A patch added to patches.py and left out of ASKED_AT_START would be asked where a
    pass needs it, after a local activity: the risk the gate removes."""
    defined = {
        value
        for name, value in vars(patches).items()
        if name.isupper()
        and isinstance(value, str)
        and name not in ("PATCHES_AT_START", "FOLDED_PATCHES", "FOLDED_PATCHES_2")
    }
    assert defined == set(patches.ASKED_AT_START)
    assert len(patches.ASKED_AT_START) == len(defined)


async def test_a_new_run_records_one_patch_before_its_first_local_activity(
    time_env: WorkflowEnvironment,
) -> None:
    """The newest fold stands for every patch before it: a new run records its marker
    and those of the patches added after it (none yet), each with the SDK's upsert of
    TemporalChangeVersion, then passes as every patch asks."""
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
    patched = [
        json.loads(m.details["patch-data"].payloads[0].data)["id"]
        for m in markers
        if m.marker_name == "core_patch"
    ]
    later = [p for p in patches.ASKED_AT_START if p not in patches.FOLDED_2]
    assert patched == [patches.FOLDED_PATCHES_2, *later]
    assert kinds[: len(patched)] == ["core_patch"] * len(patched)
    versions = [
        e
        for e in history.events
        if e.HasField("upsert_workflow_search_attributes_event_attributes")
        and "TemporalChangeVersion"
        in e.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields
    ]
    assert len(versions) == len(patched)
    # Every patch's path was taken: the steps that joined the pipeline under one ran; the
    # first pass took two local activities, its load and one that ran its steps and
    # wrote its status (one-activity-passes, status-with-steps), and the woken one a
    # single one that loaded the instance as the first found it and ran its pass
    # (fresh-load-with-steps).
    ran = {name for name, _ in world.calls}
    joined = {step for step, _ in patches.PATCHED_STEPS} & {s.name for s in pipeline.CONVERGE}
    assert joined <= ran
    assert kinds[len(patched) :] == ["core_local_activity"] * 3
    assert [local_activity_type(m) for m in markers[len(patched) :]] == [
        pipeline.LOAD_INSTANCE,
        pipeline.RUN_PASS,
        pipeline.LOAD_AND_RUN_PASS,
    ]


def test_the_folded_patch_stands_for_the_sixteen_patches_before_it() -> None:
    """What the fold stands for never changes (runs recorded it): the sixteen ids as
    recorded, and a patch added later stays outside it, asked at the start beside it."""
    assert sorted(patches.FOLDED) == [
        "admin-step",
        "backup-steps",
        "held-steps-go-on",
        "load-with-steps",
        "local-health-checks",
        "local-passes",
        "local-ready-passes",
        "one-activity-passes",
        "patches-at-start",
        "repave-step",
        "retention-step",
        "rotations-when-ready",
        "status-with-steps",
        "tls-step",
        "upgrade-step",
        "wakes-before-load",
    ]
    assert patches.FOLDED_PATCHES not in patches.FOLDED


def test_the_second_fold_stands_for_the_first_and_the_patches_asked_beside_it() -> None:
    """``folded-patches-2`` stands for what ``folded-patches`` stood for, that fold, the
    patch a run begun with it asked beside it (timer-history-reads) and the one added
    with it (fresh-load-with-steps); the folds are asked newest first."""
    assert sorted(patches.FOLDED_2 - patches.FOLDED) == [
        "folded-patches",
        "fresh-load-with-steps",
        "timer-history-reads",
    ]
    assert patches.FOLDED <= patches.FOLDED_2
    assert patches.FOLDED_PATCHES_2 not in patches.FOLDED_2
    assert [fold for fold, _ in patches.FOLDS] == ["folded-patches-2", "folded-patches"]
