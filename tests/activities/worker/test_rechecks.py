"""The worker's re-checks of settled instances (``activities.worker.rechecks``).

Their schedule is pure and tested with a clock the test moves; the re-check itself
runs against the real API server: it finds a settled instance quiet while nothing
changed, and a change a step would act on, or a status that would change, without
writing anything."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.testing import ActivityEnvironment

from activities.infra.context import Context
from activities.infra.reads import shared_reads
from activities.infra.views import Views
from activities.steps.loop import run as run_step
from activities.worker.instance import LoadInstance
from activities.worker.passes import Passes, StepActivity
from activities.worker.rechecks import (
    START_GAP_SECONDS,
    START_SPREAD_SECONDS,
    STUCK_SECONDS,
    Rechecks,
    Signal,
)
from activities.worker.status import WriteStatus
from dbi import names, pipeline
from dbi.config import Config
from dbi.health import Health
from dbi.messages import AWAIT_NET, Wake
from dbi.models import Served
from dbi.passes import (
    LoadedPass,
    LoadedPassInput,
    PassInput,
    PendingStatus,
    StatusInput,
    awaits,
    settled,
)
from dbi.status import PassReport
from dbi.steps import (
    InstanceSnapshot,
    Outcome,
    StepInput,
    StepResult,
    StepsInput,
    StepsResult,
)
from tests.activities.conftest import Counted
from tests.activities.notes import create_instance, idle_read, note, note_step, service
from tests.polling import eventually, until

SPEC = pipeline.CONVERGE[0]
HOUR = 3600.0
RUN_ONE, RUN_TWO = "run-1/1", "run-1/2"  # the ids of two passes
SNAPSHOT = InstanceSnapshot(
    exists=True, uid="uid-1", generation=3, health_check_interval_seconds=60
)


def loaded_input(
    snapshot: InstanceSnapshot, namespace: str = "team-a", steps: tuple[str, ...] = (SPEC.name,)
) -> LoadedPassInput:
    """An idle pass of ``steps`` on ``snapshot`` of the instance ``db``, as the workflow
    builds it."""
    one = StepInput(
        namespace=namespace, name="db", uid=snapshot.uid or "", idle=True, pass_id=RUN_TWO
    )
    report = PassReport(
        workflow_id="dbinstance/team-a/db",
        generation=snapshot.generation,
        power_state=snapshot.power_state,
        deleting=False,
        pipeline=[s.reported for s in pipeline.CONVERGE if s.name in steps],
        results=[],
        paused=False,
    )
    status = StatusInput(
        namespace=one.namespace,
        name=one.name,
        uid=one.uid,
        pass_id=one.pass_id,
        report=report,
        generation_seen_at=datetime(2026, 12, 3, tzinfo=UTC),
    )
    return LoadedPassInput(
        load=one,
        expected=snapshot,
        then=PassInput(
            steps=StepsInput(steps=steps, step_input=one),
            then=PendingStatus(status=status, requested=Served(), rotated=Served()),
        ),
    )


def satisfied(step: str = SPEC.name) -> StepResult:
    return SPEC.result(Outcome.SATISFIED, "Done", "nothing to do").model_copy(update={"step": step})


SNAPSHOT = InstanceSnapshot(
    exists=True, uid="uid-1", generation=3, health_check_interval_seconds=60
)


@pytest.mark.parametrize(
    ("done", "is_settled"),
    [
        pytest.param(StepsResult(results=[satisfied()], written=True), True, id="settled"),
        pytest.param(StepsResult(results=[satisfied()]), False, id="status-not-written"),
        pytest.param(StepsResult(results=[], raised=SPEC.name, written=True), False, id="raised"),
        pytest.param(
            StepsResult(results=[SPEC.result(Outcome.PENDING, "Acting", "acting")], written=True),
            False,
            id="pending",
        ),
        pytest.param(None, False, id="snapshot-not-expected"),
    ],
)
def test_only_a_pass_that_found_all_satisfied_and_wrote_its_status_settles(
    done: StepsResult | None, is_settled: bool
) -> None:
    loaded = loaded_input(SNAPSHOT)
    assert settled(loaded, LoadedPass(snapshot=SNAPSHOT, done=done)) is is_settled


def starting(step: str = SPEC.name, *, announced: bool = True) -> StepResult:
    """Pending on a transition the watcher announces (``announced``), as a VM starting."""
    result = SPEC.result(
        Outcome.PENDING, "Starting", "starting", requeue_after_seconds=30, announced=announced
    )
    return result.model_copy(update={"step": step})


TWO = (pipeline.CONVERGE[0].name, pipeline.CONVERGE[1].name)


@pytest.mark.parametrize(
    ("done", "every"),
    [
        pytest.param(
            StepsResult(results=[satisfied(), starting(TWO[1])], written=True), 30, id="awaits"
        ),
        pytest.param(
            StepsResult(results=[satisfied(), starting(TWO[1])]), None, id="status-not-written"
        ),
        pytest.param(
            StepsResult(results=[satisfied(), starting(TWO[1], announced=False)], written=True),
            None,
            id="not-announced",
        ),
        pytest.param(
            StepsResult(results=[starting(), satisfied(TWO[1])], written=True),
            None,
            id="not-the-last",
        ),
        pytest.param(
            StepsResult(results=[satisfied(), satisfied(TWO[1])], written=True), None, id="settled"
        ),
        pytest.param(
            StepsResult(results=[satisfied()], raised=TWO[1], written=True), None, id="raised"
        ),
        pytest.param(None, None, id="snapshot-not-expected"),
    ],
)
def test_only_a_pass_whose_last_step_waits_on_an_announced_transition_is_awaited(
    done: StepsResult | None, every: float | None
) -> None:
    """The worker makes the fallback look of a pass that ran every step to Satisfied but
    its last, Pending on a transition the watcher announces, and wrote its status: at the
    step's hint. Any other pass it leaves to the workflow (or settles, when all are
    Satisfied)."""
    loaded = loaded_input(SNAPSHOT, steps=TWO)
    assert awaits(loaded, LoadedPass(snapshot=SNAPSHOT, done=done)) == every


def test_a_pass_that_left_steps_unrun_does_not_settle() -> None:
    two = (pipeline.CONVERGE[0].name, pipeline.CONVERGE[1].name)
    loaded = loaded_input(SNAPSHOT, steps=two)
    done = StepsResult(results=[satisfied()], written=True)
    assert not settled(loaded, LoadedPass(snapshot=SNAPSHOT, done=done))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def schedule(interval: float = 60) -> tuple[Rechecks, Clock, list[str]]:
    clock = Clock()
    woken: list[str] = []

    async def wake(workflow_id: str, signal: Wake) -> None:
        woken.append(f"{workflow_id}: {signal.reason}" + (" (settle)" if signal.settle else ""))

    return Rechecks(wake, clock=clock), clock, woken


def quiet(loaded: LoadedPassInput) -> str | None:
    return None


def due_ids(rechecks: Rechecks) -> list[str]:
    return [workflow_id for workflow_id, _ in rechecks.due()]


def test_a_settled_instance_is_rechecked_every_interval_until_its_own_pass() -> None:
    rechecks, clock, _ = schedule()
    assert rechecks.settle("wf-a", loaded_input(SNAPSHOT), quiet, HOUR)
    times = []
    for _ in range(3600):
        clock.now += 1
        if due_ids(rechecks):
            times.append(clock.now - 1000)
    # Every minute until the workflow's own pass, an hour on; none as that pass comes.
    assert times == [60.0 * k for k in range(1, 60)]
    assert len(rechecks) == 0


def test_an_awaited_transition_is_looked_at_every_hint_until_its_own_pass() -> None:
    """A transition's fallback look comes at the step's hint (30 s), not the
    healthCheckInterval, until the workflow's own pass AWAIT_NET on."""
    rechecks, clock, _ = schedule()
    net = AWAIT_NET.total_seconds()
    assert rechecks.settle("wf-a", loaded_input(SNAPSHOT), quiet, net, every=30)
    times = []
    for _ in range(int(net)):
        clock.now += 1
        if due_ids(rechecks):
            times.append(clock.now - 1000)
    assert times == [30.0 * k for k in range(1, 10)]
    assert len(rechecks) == 0


def test_forgetting_or_settling_again_leaves_one_schedule() -> None:
    rechecks, clock, _ = schedule()
    rechecks.settle("wf-a", loaded_input(SNAPSHOT), quiet, HOUR)
    clock.now += 30
    rechecks.settle("wf-a", loaded_input(SNAPSHOT), quiet, HOUR)  # its next idle pass
    clock.now += 31
    assert due_ids(rechecks) == []  # the first schedule was replaced
    clock.now += 30
    assert due_ids(rechecks) == ["wf-a"]
    rechecks.forget("wf-a")  # its workflow runs a pass
    clock.now += 600
    assert due_ids(rechecks) == []
    assert len(rechecks) == 0


def test_an_interval_too_long_for_a_recheck_before_the_net_settles_nothing() -> None:
    rechecks, _, _ = schedule()
    long = SNAPSHOT.model_copy(update={"health_check_interval_seconds": HOUR})
    assert not rechecks.settle("wf-a", loaded_input(long), quiet, HOUR)
    assert len(rechecks) == 0


async def test_a_recheck_that_finds_a_change_wakes_the_workflow_once() -> None:
    rechecks, clock, woken = schedule()

    def changed(loaded: LoadedPassInput) -> str | None:
        return "a step would act"

    def raises(loaded: LoadedPassInput) -> str | None:
        raise RuntimeError("secret detail")

    rechecks.settle("wf-quiet", loaded_input(SNAPSHOT), quiet, HOUR)
    rechecks.settle("wf-changed", loaded_input(SNAPSHOT), changed, HOUR)
    rechecks.settle("wf-raises", loaded_input(SNAPSHOT), raises, HOUR)
    clock.now += 61
    with ThreadPoolExecutor(2) as executor:
        task = asyncio.create_task(rechecks.run(executor, tick=0.01))
        try:
            for _ in range(200):
                if len(woken) == 2:
                    break
                await asyncio.sleep(0.01)
            clock.now += 60
            await asyncio.sleep(0.1)
        finally:
            task.cancel()
    assert sorted(woken) == [
        "wf-changed: re-check: a step would act",
        "wf-raises: re-check: the re-check raised RuntimeError",
    ]
    assert len(rechecks) == 1  # the quiet one is still re-checked


def settle_wakes() -> tuple[list[str], Signal]:
    """A signal that records the workflow ids of settle wakes sent; ``wf-none`` has no
    workflow."""
    sent: list[str] = []

    async def signal(workflow_id: str, wake: Wake) -> None:
        if workflow_id == "wf-none":
            raise RuntimeError("workflow not found")
        assert wake.settle
        sent.append(workflow_id)

    return sent, signal


async def test_a_started_worker_asks_each_instance_it_has_not_settled_for_a_pass() -> None:
    """Once the views have listed the instances, each one this worker has not settled
    gets a settle wake, one after the other; one with no workflow does not stop the
    rest."""
    sent, signal = settle_wakes()
    rechecks = Rechecks(signal)
    rechecks.settle("wf-settled", loaded_input(SNAPSHOT), quiet, HOUR)
    answers: list[list[str] | None] = [None, None, ["wf-a", "wf-none", "wf-settled", "wf-b"]]
    await asyncio.wait_for(rechecks.start(lambda: answers.pop(0), spread=0.04), timeout=10)
    assert sent == ["wf-a", "wf-b"]


async def test_a_started_worker_asks_a_small_fleet_within_seconds_and_a_large_over_the_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The start round's wakes go at most START_GAP_SECONDS apart: a few instances are
    asked within a second, so that a transition's look a dead worker took with it comes
    back at once. A fleet too large for that is spread over the interval."""
    slept: list[float] = []
    pause = asyncio.sleep

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await pause(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    sent, signal = settle_wakes()
    few = [f"wf-{i}" for i in range(11)]
    await Rechecks(signal).start(lambda: few)
    assert sent == few and slept == [START_GAP_SECONDS] * len(few)
    sent.clear()
    slept.clear()
    many = [f"wf-{i}" for i in range(3000)]
    await Rechecks(signal).start(lambda: many)
    assert sent == many and set(slept) == {START_SPREAD_SECONDS / len(many)}


async def test_a_stopping_worker_asks_each_instance_it_settled_for_a_pass_elsewhere() -> None:
    """A hand-off sends each settled instance a settle wake (one with no workflow does
    not stop the rest) and re-checks nothing after it."""
    sent, signal = settle_wakes()
    clock = Clock()
    rechecks = Rechecks(signal, clock=clock)
    for workflow_id in ("wf-a", "wf-none", "wf-b"):
        rechecks.settle(workflow_id, loaded_input(SNAPSHOT), quiet, HOUR)
    assert await asyncio.wait_for(rechecks.hand_off(within=5), timeout=10) == (2, 3)
    assert sorted(sent) == ["wf-a", "wf-b"]
    assert len(rechecks) == 0
    clock.now += 120
    assert due_ids(rechecks) == []
    assert await rechecks.hand_off(within=5) == (0, 0)  # nothing is handed on twice


async def test_a_hand_off_gives_up_in_time_when_signals_hang() -> None:
    """A Temporal that does not answer keeps a stopping worker no longer than the
    hand-off's time: the instances not handed on wait for their own pass."""
    sent: list[str] = []

    async def signal(workflow_id: str, wake: Wake) -> None:
        if workflow_id.startswith("wf-hangs"):
            await asyncio.sleep(3600)
        sent.append(workflow_id)

    rechecks = Rechecks(signal)
    ids = ["wf-a", *(f"wf-hangs-{n}" for n in range(40)), "wf-b"]
    for workflow_id in ids:
        rechecks.settle(workflow_id, loaded_input(SNAPSHOT), quiet, HOUR)
    handed = await asyncio.wait_for(rechecks.hand_off(within=0.2), timeout=10)
    assert handed == (1, len(ids))  # wf-b waits behind the hung ones: not handed on
    assert sent == ["wf-a"]


async def test_a_recheck_that_hangs_fails_the_workers_liveness_until_it_returns() -> None:
    """A re-check stuck on a read that never returns holds up the others (they run a few
    at a time): past STUCK_SECONDS /livez fails, naming it, so the kubelet restarts the
    worker rather than its settled instances going unlooked-at for hours."""
    rechecks, clock, _ = schedule()
    started, release = threading.Event(), threading.Event()

    def hangs(loaded: LoadedPassInput) -> str | None:
        started.set()
        release.wait(10)
        return None

    health = Health(vitals={"rechecks": rechecks.stuck})
    rechecks.settle("wf-hangs", loaded_input(SNAPSHOT), hangs, HOUR)
    with ThreadPoolExecutor(1) as executor:
        task = asyncio.create_task(rechecks.run(executor, tick=0.01))
        try:
            clock.now += 61
            assert await asyncio.to_thread(started.wait, 5)
            clock.now += STUCK_SECONDS - 1
            await asyncio.sleep(0.05)  # the loop turns on: only the re-check is slow
            assert health.alive() == (True, "ok loop\nok rechecks\n")
            clock.now += 2
            await asyncio.sleep(0.05)
            ran = f"the re-check of wf-hangs has run for {STUCK_SECONDS + 1:.0f}s"
            assert health.alive() == (False, f"ok loop\nfail rechecks: {ran}\n")
            release.set()
            await until(lambda: rechecks.stuck() is None, timeout=5, what="the re-check returned")
        finally:
            release.set()
            task.cancel()


async def test_a_recheck_loop_that_died_fails_the_workers_liveness() -> None:
    """The loop raising ends every re-check of this worker: past STUCK_SECONDS /livez
    says so; a loop cancelled as the worker stops is not stuck."""
    rechecks, clock, _ = schedule()

    def broken() -> list[Any]:
        raise RuntimeError("boom")

    with ThreadPoolExecutor(1) as executor:
        task = asyncio.create_task(rechecks.run(executor, tick=0.01))
        await asyncio.sleep(0.05)
        rechecks.due = broken  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            await asyncio.wait_for(task, 5)
    clock.now += STUCK_SECONDS - 1
    assert rechecks.stuck() is None
    clock.now += 2
    assert rechecks.stuck() == f"the re-check loop has not turned for {STUCK_SECONDS + 1:.0f}s"

    stopped, clock, _ = schedule()
    with ThreadPoolExecutor(1) as executor:
        task = asyncio.create_task(stopped.run(executor, tick=0.01))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    clock.now += 10 * STUCK_SECONDS
    assert stopped.stuck() is None


# Against the real API server -------------------------------------------------------


@dataclass
class Taken:
    """Re-checks that take on every pass they are handed and record it, with how often
    it would be looked at (None: every healthCheckInterval)."""

    given: list[tuple[LoadedPassInput, float | None]] = field(default_factory=list)

    def settle(
        self,
        workflow_id: str,
        loaded: LoadedPassInput,
        check: Callable[[LoadedPassInput], str | None],
        net: float,
        every: float | None = None,
    ) -> bool:
        self.given.append((loaded, every))
        return True

    def forget(self, workflow_id: str) -> None:
        """A pass of ``workflow_id`` runs: nothing is re-checked here."""

    def every_interval(self) -> list[LoadedPassInput]:
        """The passes handed on to be re-checked every healthCheckInterval."""
        assert all(every is None for _, every in self.given), self.given
        return [loaded for loaded, _ in self.given]


@dataclass
class Noted:
    """The DBInstance ``db`` and its Service, and a pass of the note step over them
    (``tests.activities.infra.test_views.note_step``: it acts on the note "act")."""

    counted: Counted
    core: k8s.CoreV1Api
    namespace: str
    uid: str
    ctx: Context
    acted: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        step = note_step(self.namespace, self.acted)
        self.steps: dict[str, StepActivity] = {SPEC.name: partial(run_step, self.ctx, step)}
        self.load = LoadInstance(self.ctx).run
        self.status = WriteStatus(self.ctx)
        self.taken = Taken()
        # The worker's runner, its re-checks recording what it hands them.
        self.passes = Passes(self.ctx, self.steps, self.taken)

    def note(self, value: str) -> None:
        body = {"metadata": {"annotations": {"note": value}}}
        self.core.patch_namespaced_service("db", self.namespace, body)

    def rechecked(self, loaded: LoadedPassInput) -> tuple[str | None, list[str]]:
        """What a re-check of ``loaded`` finds, and the requests it sent."""
        before = len(self.counted.sent)
        found = self.passes.recheck(loaded)
        return found, [method for method, _ in self.counted.sent[before:]]


def noted(counted: Counted, views: Views, kube_api: Any, namespace: str) -> Noted:
    """Create ``db`` and its Service in ``namespace``; return them once the views list it."""
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service(
        namespace, service(namespace, "db", {names.INSTANCE_LABEL: "db"})
    )
    uid = create_instance(kube_api, namespace)
    eventually(lambda: (namespace, "db") in (views.instances() or []), what="the instance listed")
    return Noted(counted, core, namespace, uid, Context(kube=counted.kube, config=Config()))


@pytest.mark.stack
def test_a_recheck_is_quiet_until_a_step_would_act_or_the_status_would_change(
    counted: Counted,
    views: Views,
    kube_api: Any,
    namespace: str,
) -> None:
    """A settled pass's re-check asks the server for nothing it views and writes
    nothing: quiet while the instance is as the pass left it; a change a step would act
    on (a hand-edited Service) or a status that would change (one edited by hand) is
    reported, and still nothing is written or acted on."""
    db = noted(counted, views, kube_api, namespace)
    with shared_reads():  # a fresh pass's reads, kept for the views to vouch for
        counted.kube.instance(namespace, "db")
        counted.kube.service(namespace, "db")
    eventually(lambda: idle_read(counted, namespace, "db")[1] == 0, what="an idle read from views")
    first = StepInput(namespace=namespace, name="db", uid=db.uid, idle=True, pass_id=RUN_ONE)
    snapshot = ActivityEnvironment().run(db.load, first)
    loaded = loaded_input(snapshot, namespace)
    ran: LoadedPass = ActivityEnvironment().run(db.passes.load_and_run_pass, loaded)
    assert settled(loaded, ran)

    # The status the pass wrote reaches the views; then a re-check asks nothing.
    eventually(lambda: db.rechecked(loaded) == (None, []), what="a quiet re-check, views alone")

    db.note("act")
    eventually(lambda: db.rechecked(loaded)[0] == "a step would act", what="the Service seen")
    assert set(db.rechecked(loaded)[1]) <= {"GET"}
    assert db.acted == []
    assert note(db.core.read_namespaced_service("db", namespace).to_dict()) == "act"

    db.note("1")
    eventually(lambda: db.rechecked(loaded)[0] is None, what="quiet again")
    k8s.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        names.GROUP, names.VERSION, namespace, names.PLURAL, "db", {"status": {"phase": "Failed"}}
    )
    eventually(lambda: db.rechecked(loaded)[0] == "the status would change", what="the status seen")
    assert set(db.rechecked(loaded)[1]) <= {"GET"}
    assert db.acted == []


def _handed_an_idle_recheck(
    db: Noted, given: list[LoadedPassInput], snapshot: InstanceSnapshot
) -> None:
    """The one pass handed to the worker (``given``) is an idle pass's re-check of
    ``snapshot``: quiet from the views alone, and it still sees a change a step would act
    on (a hand-edited Service), acting on nothing."""
    [loaded] = given
    assert loaded.load.idle and loaded.then.steps.step_input.idle and loaded.expected == snapshot
    eventually(lambda: db.rechecked(loaded) == (None, []), what="a quiet re-check, views alone")
    db.note("act")
    eventually(lambda: db.rechecked(loaded)[0] == "a step would act", what="the Service seen")
    assert db.acted == []


@pytest.mark.stack
def test_a_woken_pass_that_converges_settles_and_its_recheck_reads_the_views(
    counted: Counted,
    views: Views,
    kube_api: Any,
    namespace: str,
) -> None:
    """A pass that read afresh (a woken one: its load from the server) and converged with
    nothing to serve settles the instance in ``run_pass``: the worker is handed the pass
    as an idle pass's re-check, whose reads come from the views (none sent once they have
    the pass's status) and which still sees a change a step would act on."""
    db = noted(counted, views, kube_api, namespace)
    woken = StepInput(namespace=namespace, name="db", uid=db.uid, pass_id=RUN_TWO)
    before = len(counted.sent)
    snapshot = ActivityEnvironment().run(db.load, woken)
    assert [method for method, _ in counted.sent[before:]] == ["GET"]  # from the server
    idle_pass = loaded_input(snapshot, namespace).then
    one = idle_pass.steps.model_copy(update={"step_input": woken})
    run_pass = db.passes.run_pass
    done: StepsResult = ActivityEnvironment().run(
        run_pass, idle_pass.model_copy(update={"steps": one, "settle": snapshot})
    )
    assert done.rechecked and done.written
    _handed_an_idle_recheck(db, db.taken.every_interval(), snapshot)

    # A step that acts (not Satisfied) settles nothing; nor does a pass not given what
    # its load found (it had something to serve).
    db.taken.given.clear()
    done = ActivityEnvironment().run(
        run_pass, idle_pass.model_copy(update={"steps": one, "settle": snapshot})
    )
    assert db.acted == ["act"] and not done.rechecked
    db.note("1")
    done = ActivityEnvironment().run(run_pass, idle_pass.model_copy(update={"steps": one}))
    assert done.results[0].outcome is Outcome.SATISFIED and not done.rechecked
    assert db.taken.given == []


@pytest.mark.stack
def test_a_woken_pass_run_with_its_load_reads_afresh_and_hands_on_an_idle_recheck(
    counted: Counted,
    views: Views,
    kube_api: Any,
    namespace: str,
) -> None:
    """A woken pass that expects the instance as the last pass found it loads it and runs
    its steps in one activity (``load_and_run_pass``), reading from the server, not the
    views. When it converges with nothing to serve, the worker is handed the pass as an
    idle pass's re-check: its reads come from the views (none sent once they have the
    pass's status), and it still sees a change a step would act on. A load that finds
    another snapshot runs nothing and hands nothing on."""
    db = noted(counted, views, kube_api, namespace)
    first = StepInput(namespace=namespace, name="db", uid=db.uid, pass_id=RUN_ONE)
    snapshot = ActivityEnvironment().run(db.load, first)
    idle = loaded_input(snapshot, namespace)
    fresh = StepInput(namespace=namespace, name="db", uid=db.uid, pass_id=RUN_TWO)
    then = idle.then.model_copy(
        update={"steps": idle.then.steps.model_copy(update={"step_input": fresh})}
    )
    woken = LoadedPassInput(load=fresh, expected=snapshot, then=then)
    activity = db.passes.load_and_run_pass
    before = len(counted.sent)
    ran: LoadedPass = ActivityEnvironment().run(activity, woken)
    sent = [(method, path) for method, path in counted.sent[before:] if method == "GET"]
    assert any(path.endswith("/dbinstances/db") for _, path in sent), sent  # afresh
    assert ran.done is not None and ran.done.written and ran.rechecked
    _handed_an_idle_recheck(db, db.taken.every_interval(), snapshot)

    db.taken.given.clear()
    changed = woken.model_copy(update={"expected": snapshot.model_copy(update={"generation": 9})})
    ran = ActivityEnvironment().run(activity, changed)
    assert (ran.snapshot, ran.done, ran.rechecked) == (snapshot, None, False)
    assert db.taken.given == []
    assert db.acted == []


@pytest.mark.stack
def test_a_pass_waiting_on_an_announced_transition_hands_its_look_to_the_worker(
    counted: Counted,
    views: Views,
    kube_api: Any,
    namespace: str,
) -> None:
    """A woken pass whose last step waits on a transition the watcher announces (a VM
    starting: Pending, ``announced``) hands the worker its fallback look at the step's
    hint. The look reads from the views, is quiet while the transition is as the pass
    found it (the Pending status it wrote is the one it derives again), and reports the
    transition's end (the status would change), acting on nothing."""
    db = noted(counted, views, kube_api, namespace)
    db.note("wait")
    woken = StepInput(namespace=namespace, name="db", uid=db.uid, pass_id=RUN_TWO)
    snapshot = ActivityEnvironment().run(db.load, woken)
    idle_pass = loaded_input(snapshot, namespace).then
    one = idle_pass.steps.model_copy(update={"step_input": woken})
    done: StepsResult = ActivityEnvironment().run(
        db.passes.run_pass, idle_pass.model_copy(update={"steps": one, "settle": snapshot})
    )
    assert done.rechecked and done.written
    assert done.results[-1].outcome is Outcome.PENDING and done.results[-1].announced
    [(loaded, every)] = db.taken.given
    assert every == 30 and loaded.load.idle and loaded.expected == snapshot
    eventually(lambda: db.rechecked(loaded) == (None, []), what="a quiet look, views alone")

    db.note("1")  # the transition ends
    eventually(lambda: db.rechecked(loaded)[0] == "the status would change", what="the end seen")
    assert set(db.rechecked(loaded)[1]) <= {"GET"}
    assert db.acted == []
