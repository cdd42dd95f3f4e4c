"""DBInstanceWorkflow in the time-skipping environment, with stub steps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise

import pytest
from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from dbi.messages import Progress, Wake
from dbi.models import Phase
from dbi.status import summarize
from dbi.steps import Outcome
from tests.workflows.conftest import running, settled, until
from tests.workflows.stubs import Scripted, World

ALL = [s.name for s in pipeline.CONVERGE]


@pytest.mark.parametrize(
    ("script", "ran", "phase", "waiting"),
    [
        pytest.param({}, ALL, Phase.RUNNING, "ready: re-check in 5m", id="all-satisfied"),
        pytest.param(
            {"vm": Scripted(Outcome.PENDING, "VMCreated", 45)},
            ALL[:3],
            Phase.PROVISIONING,
            "vm pending (VMCreated): look again in 45s",
            id="vm-pending",
        ),
        pytest.param(
            {"preflight": Scripted(Outcome.TERMINAL, "UnsupportedVersion")},
            ALL[:1],
            Phase.FAILED,
            "stalled at preflight (UnsupportedVersion)",
            id="preflight-terminal",
        ),
        pytest.param(
            {"health": Scripted(Outcome.TRANSIENT, "Unreachable")},
            ALL[:6],
            Phase.DEGRADED,
            "health failed (Unreachable): back off 5s",
            id="health-transient",
        ),
        pytest.param(
            {"resize": Scripted(Outcome.PENDING, "RestartRequired", 600)},
            ALL[:5],
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


async def _quiet(world: World, passes: int) -> None:
    """Give the worker real time to act, then check that no pass beyond ``passes`` ran."""
    await asyncio.sleep(0.3)
    assert len(world.reports) == passes


async def test_pending_waits_for_the_requeue_hint_and_a_wake_cuts_it_short(
    time_env: WorkflowEnvironment,
) -> None:
    """A Pending step's hint is the durable timer's length; a wake signal ends it early."""
    world = World()
    world.always["vm"] = Scripted(Outcome.PENDING, "VMCreated", 45)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(44)
        await _quiet(world, 1)
        await time_env.sleep(2)
        await settled(handle, 2)
        assert _gaps(world) == [45]

        await handle.signal("wake", Wake(reason="VirtualMachine db changed"))
        await until(lambda: len(world.reports) == 3)
        assert _gaps(world)[-1] < 5


async def test_terminal_waits_for_a_new_generation_or_retry(time_env: WorkflowEnvironment) -> None:
    """A Terminal pass makes no further pass until the generation rises or retry arrives."""
    world = World()
    world.always["preflight"] = Scripted(Outcome.TERMINAL, "UnsupportedVersion")
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(timedelta(days=2))
        await handle.signal("wake", Wake(reason="Secret db-credentials changed"))
        await _quiet(world, 1)

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
    async with running(time_env, world) as handle:
        for n, delay in enumerate(expected, start=2):
            await settled(handle, n - 1)
            await time_env.sleep(delay)
            await until(_passes(world, n))
    assert _gaps(world) == expected


async def test_ready_rechecks_at_the_health_check_interval(time_env: WorkflowEnvironment) -> None:
    """A Ready instance is looked at again every healthCheckInterval, and not before."""
    world = World(interval_seconds=60)
    async with running(time_env, world) as handle:
        await settled(handle, 1)
        await time_env.sleep(59)
        await _quiet(world, 1)
        await time_env.sleep(2)
        await until(lambda: len(world.reports) == 2)
        assert _gaps(world) == [60]
        assert all(len(p) == len(ALL) for p in world.passes())
