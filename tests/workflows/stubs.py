"""Stub activities for workflow tests: a scripted world instead of Kubernetes.

``World`` plays the DBInstance and its steps: each step returns Satisfied unless the
test scripted other outcomes for it; every call is recorded with the test server's
(time-skipped) time, so tests can measure the waits between passes. A pass runs its
steps as local activities, whose ``scheduled_time`` is the worker's wall
clock, so the stubs ask the server's clock (``World.clock``).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.worker.telemetry import measured
from dbi import pipeline
from dbi.messages import RotationRequest, RotationResult
from dbi.models import Served
from dbi.passes import (
    LoadedPass,
    LoadedPassInput,
    PassInput,
    StatusInput,
    awaits,
    settled,
    then_write,
)
from dbi.spec import PowerState
from dbi.steps import (
    InstanceSnapshot,
    Outcome,
    StepInput,
    StepResult,
    StepsInput,
    StepsResult,
    in_order,
)

CONDITIONS = {s.name: s.condition_type for s in (*pipeline.CONVERGE, *pipeline.TEARDOWN)}


@dataclass
class Scripted:
    outcome: Outcome
    reason: str = "Scripted"
    requeue_after: float | None = None
    held: bool = False  # a Pending action that waits (a window): the pass goes on
    announced: bool = False  # a Pending transition whose end the watcher announces


@dataclass
class World:
    """The instance as the stubs see it, and everything the workflow asked of them."""

    exists: bool = True
    uid: str = "uid-1"
    generation: int = 1
    deleting: bool = False
    paused: bool = False  # dbi.dev/paused
    power_state: PowerState = PowerState.RUNNING
    interval_seconds: float = 300.0
    script: dict[str, deque[Scripted]] = field(default_factory=lambda: defaultdict(deque))
    always: dict[str, Scripted] = field(default_factory=dict)
    raises: set[str] = field(default_factory=set)
    raises_once: set[str] = field(default_factory=set)  # the next call raises
    calls: list[tuple[str, datetime]] = field(default_factory=list)
    inputs: list[StepInput] = field(default_factory=list)
    loads: list[StepInput] = field(default_factory=list)  # each load's input
    reports: list[StatusInput] = field(default_factory=list)
    rotations: list[tuple[str, float, float]] = field(default_factory=list)
    rotated_ids: set[str] = field(default_factory=set)
    resize_needs_restart: bool = False
    # What the rotation activity raises, when the test wants it to fail.
    rotation_error: Exception | None = None
    # How long the rotation activity takes (real seconds).
    rotation_seconds: float = 0.2
    # The dbi.dev/*-requested-at annotations on the instance, and those the statuses
    # written so far say were served (the load reports the difference, as the real one).
    requested: Served = field(default_factory=Served)
    served: Served = field(default_factory=Served)
    # When set, a rotation before any pass found the instance Ready fails, as one on a
    # new instance does (no password to rotate yet).
    rotation_needs_ready: bool = False
    ready_seen: bool = False
    # While set, a status write after the steps (run_pass) fails, as one the API server
    # refuses would; the workflow's own write_status then writes it.
    status_fails: bool = False
    # While set, the activities that run a pass in one go (run_pass, load_and_run_pass)
    # fail as a whole, as one that timed out or lost its worker does.
    in_one_fails: bool = False
    clock: Callable[[], Awaitable[datetime]] | None = None
    # When set, a pass that settles the instance (an idle one, or one given what its load
    # found), or waits on an announced transition, says the worker re-checks it
    # (``activities.worker.rechecks``), as the real load_and_run_pass and run_pass do on a
    # worker with them.
    rechecks: bool = False

    def takes_on(self, loaded: LoadedPassInput, ran: LoadedPass) -> bool:
        """Whether a worker with re-checks takes on the pass (``worker.passes.Passes``)."""
        return self.rechecks and (settled(loaded, ran) or awaits(loaded, ran) is not None)

    def outcome_of(self, step: str, step_input: StepInput) -> Scripted:
        """Return what ``step`` does now: scripted, or Satisfied, with the side effects
        a real step would have."""
        if step == "resize" and self.resize_needs_restart:
            # Deferred policy: only a forced resize may restart the VM.
            if not step_input.allow_restart:
                return Scripted(Outcome.PENDING, "RestartRequired")
            self.resize_needs_restart = False
        if self.script[step]:
            scripted = self.script[step].popleft()
        else:
            scripted = self.always.get(step, Scripted(Outcome.SATISFIED, "Ok"))
        if step == pipeline.TEARDOWN[-1].name and scripted.outcome is Outcome.SATISFIED:
            self.exists = False
        return scripted

    async def now(self) -> datetime:
        if self.clock is None:
            raise RuntimeError("World.clock is set by tests.workflows.conftest.running")
        return await self.clock()

    def check_rotation(self) -> None:
        """Raise as the rotation activity would, when the test says it fails."""
        if self.rotation_error is not None:
            raise self.rotation_error
        if self.rotation_needs_ready and not self.ready_seen:
            raise ApplicationError(
                "the instance is not running; start it to rotate",
                type="NotRunning",
                non_retryable=True,
            )

    def unserved(self) -> Served:
        """The requested values not served yet."""
        asked, done = self.requested.model_dump(), self.served.model_dump()
        return Served.model_validate({k: v for k, v in asked.items() if v and v != done[k]})

    def step(self, name: str, step_input: StepInput, now: datetime) -> StepResult:
        """Run the stub step ``name``: record the call, raise or return its result."""
        self.calls.append((name, now))
        self.inputs.append(step_input)
        if name in self.raises or name in self.raises_once:
            self.raises_once.discard(name)
            raise RuntimeError(f"{name} exploded (stub)")
        return _result(name, CONDITIONS[name], self.outcome_of(name, step_input))

    def fail_in_one(self, activity: str) -> None:
        """Fail the activity that runs a pass in one go, as a whole, while
        ``in_one_fails``."""
        if self.in_one_fails:
            raise RuntimeError(f"{activity} failed as a whole (stub)")

    def write(self, status: StatusInput) -> bool:
        """Write a pass's status, as ``write_status`` does."""
        self.reports.append(status)
        self.served = (status.report.served or Served()).merged_over(self.served)
        self.ready_seen = self.ready_seen or status.report.converged
        return True

    def write_after_steps(self, status: StatusInput) -> bool:
        """Write the status as ``run_pass`` does after the steps: refused while
        ``status_fails``."""
        return not self.status_fails and self.write(status)

    def snapshot(self) -> InstanceSnapshot:
        """What the load finds."""
        if not self.exists:
            return InstanceSnapshot(exists=False)
        return InstanceSnapshot(
            exists=True,
            uid=self.uid,
            generation=self.generation,
            deleting=self.deleting,
            power_state=self.power_state,
            paused=self.paused,
            health_check_interval_seconds=self.interval_seconds,
            unserved=self.unserved(),
        )

    def then(self, step: str, *outcomes: Scripted) -> None:
        self.script[step].extend(outcomes)

    def passes(self) -> list[list[str]]:
        """Return the steps each written pass ran, in order."""
        return [[r.step for r in s.report.results] for s in self.reports]

    def pass_times(self) -> list[datetime]:
        """Return when each pass started (its preflight or first teardown step)."""
        firsts = {pipeline.CONVERGE[0].name, pipeline.TEARDOWN[0].name}
        return [when for step, when in self.calls if step in firsts]


def _result(step: str, condition: str, scripted: Scripted) -> StepResult:
    return StepResult(
        step=step,
        outcome=scripted.outcome,
        condition_type=condition,
        reason=scripted.reason,
        message=f"{step} is {scripted.outcome.value.lower()} (scripted).",
        requeue_after_seconds=scripted.requeue_after,
        held=scripted.held,
        announced=scripted.announced,
    )


def activities(world: World) -> list[Callable[..., Any]]:
    """Return stub activities, under the real activity names, playing ``world``."""

    def step_activity(name: str) -> Callable[..., Any]:
        @activity.defn(name=name)
        async def run(step_input: StepInput) -> StepResult:
            return world.step(name, step_input, await world.now())

        return run

    async def run_steps(steps_input: StepsInput) -> StepsResult:
        """The real loop (``dbi.steps.in_order``) and telemetry over the stub steps."""
        now = await world.now()
        run = measured(lambda name, step_input: world.step(name, step_input, now))
        return in_order(steps_input, run)

    @activity.defn(name=pipeline.RUN_PASS)
    async def run_pass(pass_input: PassInput) -> StepsResult:
        """The steps (``run_steps``), then the status written as the real one does
        (``then_write``); a pass given what its load found settles the instance as the
        real one does."""
        world.fail_in_one(pipeline.RUN_PASS)
        done = await run_steps(pass_input.steps)
        done = then_write(pass_input.then, done, world.write_after_steps)
        if (snapshot := pass_input.settle) is None:
            return done
        ran = LoadedPass(snapshot=snapshot, done=done)
        rechecked = world.takes_on(pass_input.rechecked(snapshot), ran)
        return done.model_copy(update={"rechecked": rechecked})

    @activity.defn(name=pipeline.LOAD_INSTANCE)
    async def load_instance(step_input: StepInput) -> InstanceSnapshot:
        world.loads.append(step_input)
        return world.snapshot()

    @activity.defn(name=pipeline.LOAD_AND_RUN_PASS)
    async def load_and_run_pass(loaded: LoadedPassInput) -> LoadedPass:
        """The load, then ``run_pass`` when it found what the workflow expected (as
        ``activities.worker.passes.Passes`` does, over these async stubs)."""
        world.fail_in_one(pipeline.LOAD_AND_RUN_PASS)
        world.loads.append(loaded.load)
        snapshot = world.snapshot()
        if snapshot != loaded.expected:
            return LoadedPass(snapshot=snapshot)
        ran = LoadedPass(snapshot=snapshot, done=await run_pass(loaded.then))
        return ran.model_copy(update={"rechecked": world.takes_on(loaded.rechecked(), ran)})

    @activity.defn(name=pipeline.WRITE_STATUS)
    async def write_status(status: StatusInput) -> None:
        world.write(status)

    steps = [step_activity(name) for name in CONDITIONS]
    return [
        *steps,
        run_pass,
        load_instance,
        load_and_run_pass,
        write_status,
        *_rotations(world),
    ]


def _rotations(world: World) -> list[Callable[..., Any]]:
    """The two rotation activities, playing ``world``."""

    @activity.defn(name=pipeline.ROTATE_ADMIN_CREDENTIALS)
    async def rotate_admin_credentials(request: RotationRequest) -> RotationResult:
        world.calls.append((pipeline.ROTATE_ADMIN_CREDENTIALS, await world.now()))
        world.rotated_ids.add(request.request_id)
        return RotationResult(
            secret_name="dbi-system/dbi-admin-uid-1",  # noqa: S106 (a name, no password)
            resource_version="",
            rotated=True,
        )

    @activity.defn(name=pipeline.ROTATE_CREDENTIALS)
    async def rotate_credentials(request: RotationRequest) -> RotationResult:
        started = time.monotonic()
        world.calls.append(("rotate_credentials", await world.now()))
        world.check_rotation()
        rotated = request.request_id not in world.rotated_ids
        world.rotated_ids.add(request.request_id)
        await asyncio.sleep(world.rotation_seconds)  # overlapping rotations would show
        world.rotations.append((request.request_id, started, time.monotonic()))
        return RotationResult(
            secret_name=f"{request.name}-credentials",
            resource_version=str(len(world.rotations)),
            rotated=rotated,
        )

    return [rotate_credentials, rotate_admin_credentials]
