"""DBInstanceWorkflow in the time-skipping environment, with stub steps."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from dbi import maintenance, pipeline
from dbi.maintenance import MaintenanceWindow
from dbi.messages import (
    AWAIT_NET,
    RECHECK_NET,
    TASK_TIMEOUT,
    Progress,
    ResizeResult,
    RotationResult,
    SeenInstance,
    Wake,
)
from dbi.models import Phase, Served
from dbi.passes import StatusInput
from dbi.status import summarize
from dbi.steps import Outcome
from tests.history import local_activities, local_activity_type
from tests.workflows.conftest import running, settled, until
from tests.workflows.stubs import Scripted, World

NET = RECHECK_NET.total_seconds()  # a settled instance's own pass comes this late

ALL = [s.name for s in pipeline.CONVERGE]


def upto(step: str) -> list[str]:
    """The pipeline's steps up to ``step``, included."""
    return ALL[: ALL.index(step) + 1]


@pytest.mark.parametrize(
    ("script", "ran", "phase", "waiting"),
    [
        pytest.param({}, ALL, Phase.RUNNING, "ready: re-check in 5m", id="all-satisfied"),
        pytest.param(
            {"vm": Scripted(Outcome.PENDING, "VMCreated", 45)},
            upto("vm"),
            Phase.PROVISIONING,
            "vm pending (VMCreated): look again in 45s",
            id="vm-pending",
        ),
        pytest.param(
            {"preflight": Scripted(Outcome.TERMINAL, "UnsupportedVersion")},
            upto("preflight"),
            Phase.FAILED,
            "stalled at preflight (UnsupportedVersion)",
            id="preflight-terminal",
        ),
        pytest.param(
            {"health": Scripted(Outcome.TRANSIENT, "Unreachable")},
            upto("health"),
            Phase.DEGRADED,
            "health failed (Unreachable): back off 5s",
            id="health-transient",
        ),
        pytest.param(
            {"resize": Scripted(Outcome.PENDING, "RestartRequired", 600)},
            upto("resize"),
            Phase.RESIZING,
            "resize pending (RestartRequired): look again in 10m",
            id="resize-pending",
        ),
    ],
)
async def test_a_pass_runs_steps_while_satisfied_then_writes_status_and_waits(
    time_env: WorkflowEnvironment,
    script: dict[str, Scripted],
    ran: list[str],
    phase: Phase,
    waiting: str,
) -> None:
    """The first non-Satisfied step ends the pass; status and the wait follow its outcome."""
    world = World()
    for step, scripted in script.items():
        world.then(step, scripted)
    async with running(time_env, world) as handle:
        await until(lambda: len(world.reports) == 1)
        assert world.passes() == [ran]
        report = world.reports[0].report
        assert summarize(report).phase is phase
        progress = await handle.query("progress", result_type=Progress)
        assert progress.waiting_for.startswith(waiting)


def _gaps(world: World) -> list[float]:
    times = world.pass_times()
    return [round((b - a).total_seconds()) for a, b in pairwise(times)]


def _passes(world: World, n: int) -> Callable[[], bool]:
    return lambda: len(world.reports) == n


async def _settled_at_last(handle: Any, world: World) -> Progress:
    """Wait until the workflow waits and no pass or status write has landed for a while
    (a new run's own first pass may still land after the last wake)."""
    last: tuple[int, int] | None = None
    for _ in range(100):
        try:
            progress: Progress = await handle.query(
                "progress", result_type=Progress, rpc_timeout=timedelta(seconds=2)
            )
        except RPCError:
            # The time-skipping server may not answer while a run continues as new.
            await asyncio.sleep(0.2)
            continue
        now = (progress.passes, len(world.reports))
        if progress.waiting_for != "a pass is running" and now == last:
            return progress
        last = now
        await asyncio.sleep(0.2)
    raise AssertionError(f"the pass count did not settle: {last}")


async def _pass_after_each(env: WorkflowEnvironment, world: World, delays: list[int]) -> None:
    """Run the workflow, skipping time by each delay in turn and waiting for its pass."""
    async with running(env, world) as handle:
        for n, delay in enumerate(delays, start=2):
            await settled(handle, n - 1)
            await env.sleep(delay)
            await until(_passes(world, n))


def _beyond(world: World, n: int) -> Callable[[], bool]:
    return lambda: len(world.reports) > n


async def _quiet(handle: WorkflowHandle[Any, Any], world: World, passes: int) -> None:
    """Check that no pass beyond ``passes`` ran: the workflow answers a query only once
    it has handled what came before it (a timer that fired, a signal), so its answer
    holds every pass those brought."""
    progress: Progress = await handle.query("progress", result_type=Progress)
    assert (progress.passes, len(world.reports)) == (passes, passes)


async def test_pending_waits_for_the_requeue_hint_and_a_wake_cuts_it_short(
    time_env: WorkflowEnvironment,
) -> None:
    """A Pending step's hint is the durable timer's length; a wake signal ends it early."""
    world = World()
    world.always["vm"] = Scripted(Outcome.PENDING, "VMCreated", 45)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(44)
        await _quiet(handle, world, 1)
        await time_env.sleep(2)
        await settled(handle, 2)
        assert _gaps(world) == [45]

        await handle.signal("wake", Wake(reason="VirtualMachine db changed"))
        await until(lambda: len(world.reports) == 3)
        assert _gaps(world)[-1] < 5


async def test_a_restart_held_for_a_window_days_away_waits_on_a_durable_timer(
    time_env: WorkflowEnvironment,
) -> None:
    """A restart held until the maintenance window opens (Saturday 02:00, seen on a
    Tuesday at 22:00: 76 h away) is a timer of that length, capped by the health check
    interval (24 h here): the pass goes on past the held step (health and the rest run),
    re-checks each interval, and the pass at the opening applies it."""
    saturdays = MaintenanceWindow.model_validate(
        {"days": ["Sat"], "start": "02:00", "duration": "4h"}
    )
    held = maintenance.hold(saturdays, datetime(2026, 12, 1, 22, tzinfo=UTC), forced=False)
    assert held is not None and held.seconds == 76 * 3600
    world = World(interval_seconds=24 * 3600)
    hints = [held.seconds - n * 24 * 3600 for n in range(4)]  # as the step sees it each day
    world.then(
        "resize", *[Scripted(Outcome.PENDING, "MaintenanceWindow", h, held=True) for h in hints]
    )
    world.always["resize"] = Scripted(Outcome.SATISFIED, "SizeSynced")
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        first = world.reports[0].report
        assert [r.step for r in first.results] == [s.name for s in pipeline.CONVERGE]
        assert first.blocking is not None and first.blocking.reason == "MaintenanceWindow"
        await time_env.sleep(timedelta(hours=76, minutes=1))
        await settled(handle, 5)
        assert _gaps(world) == [24 * 3600, 24 * 3600, 24 * 3600, 4 * 3600]
        assert world.reports[-1].report.blocking is None


async def test_a_transition_still_under_way_is_looked_at_less_often(
    time_env: WorkflowEnvironment,
) -> None:
    """The same step Pending for the same reason pass after pass: its hint doubles up to
    10s (the watcher's wake brings the pass that sees the change); another reason starts
    again from the hint."""
    world = World()
    world.then("power", *[Scripted(Outcome.PENDING, "Starting", 2)] * 5)
    world.then("power", Scripted(Outcome.PENDING, "Restarting", 2))
    world.always["power"] = Scripted(Outcome.SATISFIED, "Running")
    expected = [2, 4, 8, 10, 10, 2]
    await _pass_after_each(time_env, world, expected)
    assert _gaps(world) == expected


async def test_terminal_waits_for_a_new_generation_or_retry(time_env: WorkflowEnvironment) -> None:
    """A Terminal pass makes no further pass until the generation rises or retry arrives."""
    world = World()
    world.always["preflight"] = Scripted(Outcome.TERMINAL, "UnsupportedVersion")
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(timedelta(days=2))
        await handle.signal("wake", Wake(reason="Secret db-credentials changed"))
        await _quiet(handle, world, 1)

        world.generation = 2
        await handle.signal("wake", Wake(reason="DBInstance db modified", generation=2))
        await until(lambda: len(world.reports) == 2)
        await handle.signal("retry")
        await until(lambda: len(world.reports) == 3)
        assert [s.report.generation for s in world.reports] == [1, 2, 2]


async def test_transient_backoff_grows_and_is_capped(time_env: WorkflowEnvironment) -> None:
    """Transient passes back off 5s, 10s, 20s ... up to five minutes, on durable timers."""
    world = World()
    world.always["health"] = Scripted(Outcome.TRANSIENT, "Unreachable")
    expected = [5, 10, 20, 40, 80, 160, 300, 300]
    await _pass_after_each(time_env, world, expected)
    assert _gaps(world) == expected


async def test_ready_rechecks_at_the_health_check_interval(time_env: WorkflowEnvironment) -> None:
    """A Ready instance is looked at again after its healthCheckInterval, not before, and
    at most a tenth later (the spread that keeps a fleet's re-checks apart)."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(59)
        await _quiet(handle, world, 1)
        await time_env.sleep(8)
        await until(lambda: len(world.reports) == 2)
        assert 60 <= _gaps(world)[0] <= 66
        assert all(len(p) == len(ALL) for p in world.passes())


SETTLED = "ready: the worker re-checks every 1m; own pass in"  # the settled wait's summary


async def test_a_pass_the_worker_settled_waits_the_net_and_a_recheck_wake_brings_one(
    time_env: WorkflowEnvironment,
) -> None:
    """A pass that converges with nothing to serve settles the instance on a worker that
    re-checks it (``activities.worker.rechecks``), the first pass and a woken one as much as an
    idle one: the workflow's own next pass comes only RECHECK_NET later (with the
    spread), the worker looking every interval meanwhile. The wake a re-check sends
    when it finds a change brings a pass at once, which reads afresh; one that does not
    converge is looked at again on the workflow's timer, and the pass that converges
    settles the instance again."""
    world = World(interval_seconds=60, rechecks=True)
    async with running(time_env, world) as handle:
        progress = await settled(handle, 1)  # the first pass: converged, nothing to serve
        assert progress.waiting_for.startswith(SETTLED)
        await time_env.sleep(NET - 100)  # not the 1m interval: RECHECK_NET
        await _quiet(handle, world, 1)
        world.then("access", Scripted(Outcome.PENDING, "ServiceCreated", 30))
        await handle.signal("wake", Wake(reason="re-check: a step would act"))
        await until(_passes(world, 2))  # woken: reads afresh; Pending, so not settled
        assert (await settled(handle, 2)).waiting_for.startswith("access pending")
        await time_env.sleep(31)
        await until(_passes(world, 3))  # its timer's pass converges: settled again
        assert (await settled(handle, 3)).waiting_for.startswith(SETTLED)
        await time_env.sleep(NET - 100)
        await _quiet(handle, world, 3)
        await time_env.sleep(100 + 60 * 0.1 + 1)
        await until(_passes(world, 4))  # the safety net: the workflow's own pass
        assert (await settled(handle, 4)).waiting_for.startswith(SETTLED)
    idle: dict[str, set[bool]] = {}
    for one in world.inputs:
        idle.setdefault(one.pass_id, set()).add(one.idle)
    assert [sorted(found) for found in idle.values()] == [[False], [False], [False], [True]]


STARTING = Scripted(Outcome.PENDING, "Starting", 30, announced=True)  # a VM booting
AWAITED = "power pending (Starting): the worker looks again every 30s; own pass in 5m"


async def test_a_pass_waiting_on_an_announced_transition_leaves_its_look_to_the_worker(
    time_env: WorkflowEnvironment,
) -> None:
    """A pass that finds a VM starting (power Pending, ``announced``) on a worker that
    takes it on (``dbi.passes.awaits``) waits AWAIT_NET for its own pass, not
    the step's 30 s: the worker makes that look, and the watcher's wake when the VM runs
    brings the pass. With nothing to wake it, the workflow's own pass comes at the net.
    On a worker that does not take it on, the timer brings the pass after 30 s."""
    world = World(interval_seconds=60, rechecks=True)
    world.then("power", STARTING, STARTING)
    async with running(time_env, world) as handle:
        assert (await settled(handle, 1)).waiting_for == AWAITED
        await time_env.sleep(31)
        await _quiet(handle, world, 1)  # no pass of the workflow's own at the step's 30 s
        await handle.signal("wake", Wake(reason="VirtualMachine db modified"))
        await until(_passes(world, 2))  # the VM runs: still starting, as scripted
        assert (await settled(handle, 2)).waiting_for == AWAITED
        await time_env.sleep(AWAIT_NET.total_seconds() - 10)
        await _quiet(handle, world, 2)
        await time_env.sleep(11)
        await until(_passes(world, 3))  # the net: its own pass, which converges
        assert (await settled(handle, 3)).waiting_for.startswith(SETTLED)

    # A worker that starts (or stops) asks for the pass of a wait the worker took on: the
    # look went with a worker that died.
    handed = World(interval_seconds=60, rechecks=True)
    handed.then("power", STARTING)
    async with running(time_env, handed) as handle:
        assert (await settled(handle, 1)).waiting_for == AWAITED
        await handle.signal("wake", Wake(reason="a worker started", settle=True))
        await until(_passes(handed, 2))
        # Its task done before the block terminates the run: a task cut off mid-way keeps
        # the test server's time-skipping lock, and the next block's sleep would hang.
        await settled(handle, 2)

    timed = World(interval_seconds=60)
    timed.then("power", STARTING)
    async with running(time_env, timed) as handle:
        waiting = (await settled(handle, 1)).waiting_for
        assert waiting == "power pending (Starting): look again in 30s"
        await time_env.sleep(31)
        await until(_passes(timed, 2))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        pytest.param({"requested": Served(reconcile_requested_at="r1")}, "a request", id="request"),
        pytest.param({"paused": True}, "a pause", id="paused"),
    ],
)
async def test_a_pass_with_something_to_serve_does_not_settle(
    time_env: WorkflowEnvironment, change: dict[str, Any], why: str
) -> None:
    """A pass that serves a request (or holds its actions while paused) leaves the
    instance on the workflow's timer, even when every step ends Satisfied: the status
    it wrote records what it served, so the next pass (an idle one, when nothing else
    is asked) looks again before the worker takes over."""
    world = World(interval_seconds=60, rechecks=True)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        for name, value in change.items():
            setattr(world, name, value)
        await handle.signal("wake", Wake(reason=f"{why} came"))
        await until(_passes(world, 2))
        assert (await settled(handle, 2)).waiting_for.startswith("ready: re-check in 1m"), why
        world.paused = False
        await time_env.sleep(67)
        await until(_passes(world, 3))  # the health check: nothing to serve now
        assert (await settled(handle, 3)).waiting_for.startswith(SETTLED)


async def test_a_started_workers_settle_wake_brings_an_idle_pass_to_a_ready_instance_only(
    time_env: WorkflowEnvironment,
) -> None:
    """A worker that starts asks each instance for its health check's pass now
    (``Wake.settle``): a Ready instance runs an idle pass at once, which settles it on a
    worker that re-checks; a Pending one's wait is not cut short."""
    world = World(interval_seconds=60, rechecks=True)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        settle = Wake(reason="a worker started", settle=True)
        await handle.signal("wake", settle)
        await until(_passes(world, 2))
        progress = await settled(handle, 2)
        assert progress.waiting_for.startswith("ready: the worker re-checks every 1m")
        world.then("access", Scripted(Outcome.PENDING, "ServiceCreated", 30))
        await handle.signal("wake", Wake(reason="Service db deleted"))
        await until(_passes(world, 3))  # Pending: waits its 30 s
        await settled(handle, 3)
        await handle.signal("wake", settle)
        await _quiet(handle, world, 3)
    idle: dict[str, set[bool]] = {}
    for one in world.inputs:
        idle.setdefault(one.pass_id, set()).add(one.idle)
    assert [sorted(found) for found in idle.values()] == [[False], [True], [False]]


async def test_only_a_health_check_nothing_woke_is_idle(time_env: WorkflowEnvironment) -> None:
    """An idle pass reads from the worker's views (activities.infra.views); only a Ready
    instance's health check that no wake preceded is one. A pass a wake brought, and
    one after a Pending pass, read afresh: the views may not have seen the change the
    watcher woke the workflow for."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)  # 1: the first pass
        await time_env.sleep(61)
        await until(_passes(world, 2))  # 2: a health check
        await settled(handle, 2)
        await handle.signal("wake", Wake(reason="Service db deleted"))
        await until(_passes(world, 3))  # 3: woken
        await settled(handle, 3)
        world.then("access", Scripted(Outcome.PENDING, "ServiceCreated", 5))
        await handle.signal("wake", Wake(reason="Service db deleted"))
        await until(_passes(world, 4))  # 4: woken, ends Pending
        await settled(handle, 4)
        await time_env.sleep(6)
        await until(_passes(world, 5))  # 5: after a Pending pass
        await settled(handle, 5)
        await time_env.sleep(61)
        await until(_passes(world, 6))  # 6: a health check
    idle: dict[str, set[bool]] = {}
    for one in world.inputs:
        idle.setdefault(one.pass_id, set()).add(one.idle)
    assert [sorted(found) for found in idle.values()] == [
        [False],
        [True],
        [False],
        [False],
        [False],
        [True],
    ]


async def test_every_pass_but_a_forced_resize_runs_in_one_workflow_task(
    time_env: WorkflowEnvironment,
) -> None:
    """A pass runs its steps and writes its status in one local activity (no activity
    task per step, one marker for them all, beside the load's): the first, one a wake
    or a new generation brings, one after a Pending pass; a health check that finds the
    instance as the last pass did loads it in that activity too (one marker). A pass
    serving a forced resize schedules an activity per step and the status write."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)  # 1: the first pass
        await time_env.sleep(61)
        await until(_passes(world, 2))  # 2: a health check
        await settled(handle, 2)
        await handle.signal("wake", Wake(reason="DBInstance db changed", generation=2))
        await until(_passes(world, 3))  # 3: a new generation
        await settled(handle, 3)
        world.then("access", Scripted(Outcome.PENDING, "ServiceCreated", 5))
        await handle.signal("wake", Wake(reason="Service db deleted"))
        await until(_passes(world, 4))  # 4: drift found, ends Pending at access
        await settled(handle, 4)
        await time_env.sleep(6)
        await until(_passes(world, 5))  # 5: after a Pending pass
        await settled(handle, 5)
        resized = await handle.execute_update("force_resize", result_type=ResizeResult)
        await until(_passes(world, 6))  # 6: serving a forced resize, regular
        history = await handle.fetch_history()
    assert resized.resized
    assert world.passes() == [ALL, ALL, ALL, upto("access"), ALL, ALL]
    per_pass = 1 + len(ALL) + 1  # load, the steps, write status
    scheduled = [
        e for e in history.events if e.HasField("activity_task_scheduled_event_attributes")
    ]
    markers = [
        e.marker_recorded_event_attributes
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
    ]
    local = [m for m in markers if m.marker_name == "core_local_activity"]
    assert len(scheduled) == per_pass  # pass 6
    kinds = Counter(local_activity_type(m) for m in local)
    # Passes 1, 3, 4, 5: the load, then the steps and the status; 2: all in one. (4 and
    # 5 load first too: pass 3's wake announced generation 2, which the stubs' instance
    # never shows, so they expect a change.)
    assert kinds == {
        pipeline.LOAD_INSTANCE: 4,
        pipeline.RUN_PASS: 4,
        pipeline.LOAD_AND_RUN_PASS: 1,
    }
    started = [e for e in history.events if e.HasField("workflow_task_started_event_attributes")]
    assert len(started) < 2 * per_pass  # not one workflow task per activity


async def test_a_health_check_that_finds_the_instance_changed_runs_the_pass_it_calls_for(
    time_env: WorkflowEnvironment,
) -> None:
    """A health check runs its steps with its load only while it finds the instance as
    the last pass did. A change no wake announced (the watcher was down: a new
    generation, then a dbi.dev/reconcile-requested-at annotation) is found by the load,
    and the pass is decided on it: its status shows the generation and serves the
    request, without a second load."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(61)
        await until(_passes(world, 2))  # 2: unchanged, in one activity
        await settled(handle, 2)
        world.generation = 2
        await time_env.sleep(61)
        await until(_passes(world, 3))  # 3: a new generation found by the load
        await settled(handle, 3)
        world.requested = Served(reconcile_requested_at="r1")
        await time_env.sleep(61)
        await until(_passes(world, 4))  # 4: a request found by the load
        await _quiet(handle, world, 4)
        history = await handle.fetch_history()
    assert [r.report.generation for r in world.reports] == [1, 1, 2, 2]
    assert world.reports[3].report.served == Served(reconcile_requested_at="r1")
    assert world.passes() == [ALL] * 4
    local = local_activities(history)
    assert local == [
        pipeline.LOAD_INSTANCE,
        pipeline.RUN_PASS,
        pipeline.LOAD_AND_RUN_PASS,  # 2: nothing changed
        pipeline.LOAD_AND_RUN_PASS,  # 3: found generation 2, ran nothing
        pipeline.RUN_PASS,
        pipeline.LOAD_AND_RUN_PASS,  # 4: found the request, ran nothing
        pipeline.RUN_PASS,
    ]


async def test_a_pass_that_reads_afresh_runs_with_its_load_unless_a_wake_announced_a_change(
    time_env: WorkflowEnvironment,
) -> None:
    """A pass a wake brought runs its steps with its load, reading afresh, as a health
    check does from the views, while it finds the instance as the last pass did (its
    VM's change: one local activity, one marker). A user's change the load finds (a new
    generation) is decided on what it found, without a second load; a wake that
    announces a newer generation loads first. The status shows each generation."""
    world = World(interval_seconds=600)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await handle.signal("wake", Wake(reason="VirtualMachine db changed"))
        await until(_passes(world, 2))  # 2: woken, the instance unchanged
        await settled(handle, 2)
        world.generation = 2
        await handle.signal("wake", Wake(reason="Secret db-credentials changed"))
        await until(_passes(world, 3))  # 3: woken, generation 2 found by the load
        await settled(handle, 3)
        world.generation = 3
        await handle.signal("wake", Wake(reason="DBInstance db changed", generation=3))
        await until(_passes(world, 4))  # 4: woken for generation 3
        await _quiet(handle, world, 4)
        history = await handle.fetch_history()
    assert [r.report.generation for r in world.reports] == [1, 1, 2, 3]
    assert world.passes() == [ALL] * 4
    assert [load.idle for load in world.loads] == [False] * 4
    assert not any(one.idle for one in world.inputs)
    local = local_activities(history)
    assert local == [
        pipeline.LOAD_INSTANCE,  # 1: the first pass has no snapshot to expect
        pipeline.RUN_PASS,
        pipeline.LOAD_AND_RUN_PASS,  # 2: nothing changed
        pipeline.LOAD_AND_RUN_PASS,  # 3: found generation 2, ran nothing
        pipeline.RUN_PASS,
        pipeline.LOAD_INSTANCE,  # 4: generation 3 announced
        pipeline.RUN_PASS,
    ]


def _seen(world: World, **changed: Any) -> SeenInstance:
    """What the watcher's event showed of the world's instance, with ``changed``."""
    return SeenInstance.of(world.snapshot().model_copy(update=changed))


async def test_a_pass_a_wake_showed_the_instance_to_runs_with_its_load(
    time_env: WorkflowEnvironment,
) -> None:
    """The watcher's wake of a new instance, and of a new generation, carries the
    instance as its event showed it: the pass it brings expects its load to find it so,
    and runs its steps with that load (one local activity, one marker). The status
    shows each generation, as a pass that loaded first writes it."""
    world = World(interval_seconds=600)
    first = Wake(reason="DBInstance db added", generation=1, seen=_seen(world))
    async with running(time_env, world, wake=first) as handle:
        await settled(handle, 1)  # 1: new, as the wake showed it
        world.generation = 2
        await handle.signal(
            "wake", Wake(reason="DBInstance db modified", generation=2, seen=_seen(world))
        )
        await until(_passes(world, 2))  # 2: generation 2, as the wake showed it
        await _quiet(handle, world, 2)
        history = await handle.fetch_history()
    assert [r.report.generation for r in world.reports] == [1, 2]
    assert [r.uid for r in world.reports] == [world.uid] * 2
    assert world.passes() == [ALL] * 2
    assert [load.idle for load in world.loads] == [False] * 2
    assert local_activities(history) == [pipeline.LOAD_AND_RUN_PASS] * 2


@pytest.mark.parametrize(
    "changed",
    [
        pytest.param({"paused": True}, id="paused-since"),
        pytest.param({"generation": 2}, id="edited-since"),
        pytest.param({"exists": False}, id="deleted-since"),
    ],
)
async def test_a_pass_whose_load_finds_other_than_the_wake_showed_decides_on_the_load(
    time_env: WorkflowEnvironment, changed: dict[str, Any]
) -> None:
    """The instance changed between the watcher's event and the pass's load (paused,
    edited again, deleted): the load runs nothing, and the pass is decided on what it
    found, without a second load: a paused instance's steps act on nothing, a newer
    generation's status shows it, a deleted instance's workflow completes."""
    world = World(interval_seconds=600)
    first = Wake(reason="DBInstance db added", generation=1, seen=_seen(world))
    for field, value in changed.items():
        setattr(world, field, value)
    async with running(time_env, world, wake=first) as handle:
        if not world.exists:
            assert await handle.result() == "the instance no longer exists"
        else:
            await settled(handle, 1)
            await _quiet(handle, world, 1)
        history = await handle.fetch_history()
    local = local_activities(history)
    assert local[0] == pipeline.LOAD_AND_RUN_PASS
    assert pipeline.LOAD_INSTANCE not in local
    if not world.exists:
        assert local == [pipeline.LOAD_AND_RUN_PASS]
        assert world.reports == []
        return
    assert local == [pipeline.LOAD_AND_RUN_PASS, pipeline.RUN_PASS]
    (report,) = world.reports
    assert report.report.generation == world.generation
    assert report.report.paused is world.paused
    assert all(one.paused is world.paused for one in world.inputs)


async def test_a_status_the_steps_activity_could_not_write_is_written_by_the_workflow(
    time_env: WorkflowEnvironment,
) -> None:
    """When the status write after a pass's steps fails (the API server refused it), the
    workflow writes that pass's status with an activity of its own: every pass's status
    lands once, with what the pass found."""
    world = World(interval_seconds=60, status_fails=True)
    world.then("access", Scripted(Outcome.PENDING, "ServiceCreated", 5))
    async with running(time_env, world) as handle:
        await settled(handle, 1)  # 1: Pending at access
        await time_env.sleep(6)
        await until(_passes(world, 2))  # 2: converged
        await settled(handle, 2)
        world.status_fails = False
        await time_env.sleep(61)
        await until(_passes(world, 3))  # 3: a health check, written with its steps
        await _quiet(handle, world, 3)
        history = await handle.fetch_history()
    assert world.passes() == [upto("access"), ALL, ALL]
    assert [r.report.converged for r in world.reports] == [False, True, True]
    local = local_activities(history)
    assert Counter(local) == {
        pipeline.LOAD_INSTANCE: 1,
        pipeline.RUN_PASS: 1,
        # 2: the hint's pass, loaded afresh; 3: the health check's, from the views
        pipeline.LOAD_AND_RUN_PASS: 2,
        pipeline.WRITE_STATUS: 2,
    }


async def test_rotations_return_their_results_one_after_the_other(
    time_env: WorkflowEnvironment,
) -> None:
    """Two concurrent rotate_credentials updates both return, and never run at once."""
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        first, second = await asyncio.gather(
            handle.execute_update("rotate_credentials", result_type=RotationResult),
            handle.execute_update("rotate_credentials", result_type=RotationResult),
        )
    assert first.rotated and second.rotated
    assert first.secret_name == second.secret_name
    assert {first.resource_version, second.resource_version} == {"1", "2"}
    (_, _, end_first), (_, start_second, _) = sorted(world.rotations, key=lambda r: r[1])
    assert start_second >= end_first


async def test_force_resize_returns_once_the_size_is_synced(time_env: WorkflowEnvironment) -> None:
    """force_resize lets the resize step restart, and returns when a pass shows it done."""
    world = World(resize_needs_restart=True)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        assert world.passes()[0][-1] == "resize"
        result = await handle.execute_update("force_resize", result_type=ResizeResult)
    assert result.resized and result.reason == "Ok"
    assert [i.allow_restart for i in world.inputs if i.allow_restart] != []


async def test_updates_are_refused_while_the_instance_is_deleted(
    time_env: WorkflowEnvironment,
) -> None:
    """Neither update is accepted once deletion has begun; the caller gets the reason."""
    world = World(deleting=True)
    world.always["teardown_vm"] = Scripted(Outcome.PENDING, "VMDeleting", 600)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        for update in ("rotate_credentials", "force_resize"):
            with pytest.raises(WorkflowUpdateFailedError) as raised:
                await handle.execute_update(update)
            assert "being deleted" in str(raised.value.cause)
    assert world.rotations == []


async def test_deletion_runs_the_teardown_then_the_workflow_completes(
    time_env: WorkflowEnvironment,
) -> None:
    """Once the instance is being deleted, teardown steps run and the workflow completes."""
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        world.deleting = True
        await handle.signal("wake", Wake(reason="DBInstance db modified", generation=1))
        assert await handle.result() == "deleted"
    teardown = [s.name for s in pipeline.TEARDOWN]
    assert [step for step, _ in world.calls][-len(teardown) :] == teardown


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"exists": False}, id="instance-gone"),
        pytest.param({"uid": "uid-2"}, id="recreated-with-another-uid"),
    ],
)
async def test_the_workflow_completes_when_its_instance_is_gone(
    time_env: WorkflowEnvironment, change: dict[str, object]
) -> None:
    """A DBInstance that no longer exists, or exists under another UID, ends the workflow."""
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        for key, value in change.items():
            setattr(world, key, value)
        await handle.signal("wake", Wake(reason="DBInstance db deleted"))
        assert await handle.result() == "the instance no longer exists"


def _assert_failed(status: StatusInput, step: str) -> None:
    """The pass ended at ``step``, Transient with the generic reason, no error text shown."""
    blocking = status.report.blocking
    assert blocking is not None
    assert (blocking.step, blocking.outcome, blocking.reason) == (
        step,
        Outcome.TRANSIENT,
        "StepFailed",
    )
    assert "exploded" not in blocking.message


async def test_a_step_that_always_raises_leaves_the_workflow_running_and_transient(
    time_env: WorkflowEnvironment,
) -> None:
    """Activity failures become a Transient status with a generic reason; the run goes on."""
    world = World(raises={"vm"})
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        _assert_failed(world.reports[0], "vm")
        # Once in the activity that runs the pass's steps, then three tries of its own.
        assert [step for step, _ in world.calls].count("vm") == 1 + 3
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_a_step_that_raises_once_is_retried_and_the_pass_goes_on(
    time_env: WorkflowEnvironment,
) -> None:
    """A step that raises in the activity running the pass's steps ends that activity; the
    pass goes on from that step, an activity per step: its retry succeeds and the steps
    after it run, each once; the steps before it do not run again."""
    world = World(raises_once={"tls"})
    async with running(time_env, world) as handle:
        await settled(handle, 1)
    calls = [step for step, _ in world.calls]
    assert world.passes() == [ALL]
    assert all(r.outcome is Outcome.SATISFIED for r in world.reports[0].report.results)
    assert calls == [*upto("tls"), *ALL[ALL.index("tls") :]]


async def test_a_health_check_step_that_raises_is_transient_too(
    time_env: WorkflowEnvironment,
) -> None:
    """A step that keeps raising in a health check (a local activity) ends the pass
    Transient with the generic reason, as in any other pass; the run goes on."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        world.raises.add("health")
        await time_env.sleep(61)
        await until(_passes(world, 2))
        _assert_failed(world.reports[1], "health")
        # The first pass's, then the health check's: once in one activity, three alone.
        assert [step for step, _ in world.calls].count("health") == 1 + 1 + 3
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def test_a_pass_whose_one_activity_fails_as_a_whole_goes_on_step_by_step(
    time_env: WorkflowEnvironment,
) -> None:
    """When the activity that runs a pass's steps in one go fails as a whole (it timed
    out, or its worker went away), the pass runs its steps one by one, each once, and
    the workflow writes the status; a health check, whose one activity loads the
    instance too, loads it first instead and goes on the same way."""
    world = World(in_one_fails=True, interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        assert [step for step, _ in world.calls] == ALL
        assert world.passes() == [ALL] and world.reports[0].report.converged
        await time_env.sleep(61)
        await until(_passes(world, 2))
        assert [step for step, _ in world.calls] == ALL + ALL
        assert world.passes() == [ALL, ALL] and len(world.loads) == 2
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING


async def _wake(handle: Any, wake: Wake) -> None:
    """Signal as the watcher does, which sends a failed wake again a moment later: the
    time-skipping test server's continue-as-new is not atomic (temporalio/sdk-java#1538),
    and a signal that falls between the two runs is refused as for a completed one."""
    for _ in range(50):
        try:
            await handle.signal("wake", wake)
            return
        except RPCError as e:
            if e.status is not RPCStatusCode.NOT_FOUND:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError("the wake was refused 50 times")


async def test_continue_as_new_keeps_state_and_loses_no_signal(
    time_env: WorkflowEnvironment,
) -> None:
    """Under a low history limit the workflow continues as new; every wake still lands."""
    world = World()
    world.always["vm"] = Scripted(Outcome.PENDING, "VMCreated", 3600)
    async with running(time_env, world, history_limit=50) as handle:
        first_run = (await handle.describe()).run_id
        await settled(handle, 1)
        for n in range(14):
            # A new run starts with a pass of its own, so count passes after each wake,
            # and let each settle: a signal that comes in as a run continues as new has
            # the server refuse that workflow task, whose pass then runs again (local
            # activities and all), so its status write would be counted twice.
            before = len(world.reports)
            await _wake(handle, Wake(reason=f"VirtualMachine db changed ({n})"))
            await until(_beyond(world, before))
            await _settled_at_last(handle, world)
        latest = await time_env.client.get_workflow_handle(handle.id).describe()
        assert latest.run_id != first_run
        # The new run gives its passes' local activities the same room.
        config = latest.raw_description.execution_config
        assert config.default_workflow_task_timeout.ToTimedelta() == TASK_TIMEOUT
        progress = await _settled_at_last(handle, world)
        assert progress.passes == len(world.reports) >= 15
