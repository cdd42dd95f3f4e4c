"""The status write's reads and writes, with plain data: it starts from the pass's read,
writes only a status that changed, and a retry reads afresh; ``run_pass`` writes it
after the steps, or leaves it to the workflow."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from temporalio.testing import ActivityEnvironment

from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from activities.worker.passes import Passes
from activities.worker.status import WriteStatus
from dbi.config import Config
from dbi.models import DBInstance, DBInstanceStatus, Served, WalArchive
from dbi.passes import LoadedPass, LoadedPassInput, PassInput, PendingStatus, StatusInput
from dbi.status import PassReport, derive
from dbi.steps import (
    InstanceSnapshot,
    Outcome,
    StepInput,
    StepResult,
    StepsInput,
    StepsResult,
)
from tests.activities.owned import instance as plain_instance
from tests.dbi.passes import converged, until

UID = "uid-new"  # tests.activities.infra.test_ownership's
RUN = "run/7"  # the pass's id


class Recording:
    """Kube's reads and the status patches, counted; the instance as the server has it."""

    def __init__(self, stored: Instance) -> None:
        self.stored = stored
        self.reads = 0
        self.patches: list[dict[str, Any]] = []
        self.events: list[Any] = []
        self.objects = self.core = self

    def instance(self, namespace: str, name: str) -> Instance:
        self.reads += 1
        return self.stored

    def patch_namespaced_custom_object_status(self, *args: Any) -> None:
        self.patches.append(args[-1])

    def create_namespaced_event(self, namespace: str, body: Any) -> None:
        self.events.append(body)


def with_status(status: DBInstanceStatus) -> Instance:
    base = plain_instance()
    model = DBInstance.model_validate(
        {**base.model.model_dump(by_alias=True, exclude_none=True), "status": status.model_dump()}
    )
    return Instance(model=model, uid=UID, generation=2, deleting=False, finalizers=())


def written_by(report: PassReport) -> DBInstanceStatus:
    return derive(DBInstanceStatus(), report, now=datetime(2026, 12, 1, tzinfo=UTC))[0]


def setup(stored: Instance) -> tuple[WriteStatus, Recording]:
    kube = Recording(stored)
    ctx = Context(kube=cast(Kube, kube), config=Config())
    ctx.passes.remember(RUN, stored)
    return WriteStatus(ctx), kube


def request(report: PassReport) -> StatusInput:
    return StatusInput(namespace="shop", name="db", uid=UID, pass_id=RUN, report=report)


@pytest.mark.parametrize(
    ("before", "now", "patches"),
    [
        pytest.param(converged(), converged(), 0, id="idle-pass-writes-nothing"),
        pytest.param(
            until("vm", Outcome.PENDING, "VMCreated"), converged(), 1, id="a-change-is-written"
        ),
    ],
)
def test_the_status_is_written_from_the_pass_read_and_only_when_it_changed(
    before: PassReport, now: PassReport, patches: int
) -> None:
    activity, kube = setup(with_status(written_by(before)))
    ActivityEnvironment().run(activity.run, request(now))
    assert kube.reads == 0  # the pass's read, not the API server's
    assert len(kube.patches) == patches


def test_a_pass_leaves_what_the_wal_archiver_wrote() -> None:
    """status.archive is the archiver's: an idle pass finds nothing to write, and a
    pass's write names no archive (a merge patch without it keeps it)."""
    archive = WalArchive(checked_at=datetime(2026, 12, 1, 12, tzinfo=UTC))
    for before, patches in ((converged(), 0), (until("vm", Outcome.PENDING, "VMCreated"), 1)):
        status = written_by(before).model_copy(update={"archive": archive})
        activity, kube = setup(with_status(status))
        ActivityEnvironment().run(activity.run, request(converged()))
        assert len(kube.patches) == patches
        assert all("archive" not in patch["status"] for patch in kube.patches)


def test_a_retry_reads_the_instance_afresh() -> None:
    """A first try may have written before it failed: the retry must see that status,
    or it would emit the same Events again."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    env = ActivityEnvironment()
    env.info = env.info.__class__(**{**env.info.__dict__, "attempt": 2})
    env.run(activity.run, request(converged()))
    assert kube.reads == 1 and len(kube.patches) == 1


def pending(report: PassReport) -> PendingStatus:
    """The status ``run_pass`` is given before the steps: ``report`` without results."""
    begun = report.model_copy(update={"results": []})
    return PendingStatus(status=request(begun), requested=Served(), rotated=Served())


def run_pass(activity: WriteStatus, report: PassReport, raises: str | None = None) -> StepsResult:
    """``run_pass`` over steps that return ``report``'s results (``raises`` raises)."""
    results = {r.step: r for r in report.results}

    def step(name: str) -> Callable[[StepInput], StepResult]:
        def run(step_input: StepInput) -> StepResult:
            if name == raises:
                raise RuntimeError(f"{name} exploded")
            return results[name]

        return run

    steps_input = StepsInput(
        steps=tuple(results),
        step_input=StepInput(namespace="shop", name="db", uid=UID, pass_id=RUN),
    )
    run = Passes(activity.ctx, {name: step(name) for name in results}).run_pass
    done: StepsResult = ActivityEnvironment().run(
        run, PassInput(steps=steps_input, then=pending(report))
    )
    return done


def test_run_pass_writes_the_status_its_steps_found_from_the_pass_read() -> None:
    """The steps' results become the status, written from the pass's read (no GET), and
    the workflow is told it need not write it."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    done = run_pass(activity, converged())
    assert done.written and done.raised is None
    assert kube.reads == 0
    [patch] = kube.patches
    found = {c["type"]: c["status"] for c in patch["status"]["conditions"]}
    assert set(found.values()) == {"True", "False"}  # every step's condition True
    assert (patch["status"]["phase"], found["Ready"]) == ("Running", "True")


def test_run_pass_writes_nothing_when_a_step_raised() -> None:
    """A step that raised ends the activity: the pass goes on step by step in the
    workflow, which writes the status once the pass is over."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    done = run_pass(activity, converged(), raises="tls")
    assert done.raised == "tls" and not done.written
    assert kube.patches == []


def test_a_status_write_after_the_steps_that_fails_leaves_it_to_the_workflow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server refuses the write: run_pass returns its results all the same, says
    the status is not written, and forgets the pass's read, so that the workflow's own
    write reads the instance afresh (the refused try may have been written)."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    refusal = "the server refused: token s3cr3t-detail"

    def refuse(*args: Any) -> None:
        raise k8s.ApiException(status=500, reason=refusal)

    kube.patch_namespaced_custom_object_status = refuse  # type: ignore[method-assign]
    done = run_pass(activity, converged())
    assert done.raised is None and not done.written
    assert len(done.results) == len(converged().results)
    assert refusal not in caplog.text and "s3cr3t" not in caplog.text
    del kube.patch_namespaced_custom_object_status  # the recording's own again
    ActivityEnvironment().run(activity.run, request(converged()))
    assert len(kube.patches) == 1
    assert kube.reads == 1  # the workflow's write_status read it afresh


@pytest.mark.parametrize(
    ("found", "runs"),
    [
        pytest.param(InstanceSnapshot(exists=True, uid=UID, generation=2), True, id="as-expected"),
        pytest.param(InstanceSnapshot(exists=True, uid=UID, generation=3), False, id="new-spec"),
        pytest.param(
            InstanceSnapshot(exists=True, uid=UID, generation=2, deleting=True),
            False,
            id="deleting",
        ),
        pytest.param(InstanceSnapshot(exists=False), False, id="gone"),
    ],
)
def test_load_and_run_pass_runs_the_pass_only_on_the_instance_it_expected(
    found: InstanceSnapshot, runs: bool
) -> None:
    """An idle pass's load comes first: the steps run, and the status is written, only
    when the instance is as the workflow expected; else nothing runs and the workflow
    decides the pass on what the load found."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    ran: list[str] = []

    def step(step_input: StepInput) -> StepResult:
        ran.append(step_input.pass_id)
        return converged().results[0]

    passes = Passes(activity.ctx, {"preflight": step})
    passes.load = lambda _: found
    load = StepInput(namespace="shop", name="db", uid=UID, pass_id=RUN, idle=True)
    expected = InstanceSnapshot(exists=True, uid=UID, generation=2)
    then = PassInput(
        steps=StepsInput(steps=("preflight",), step_input=load),
        then=pending(converged()),
    )
    loaded: LoadedPass = ActivityEnvironment().run(
        passes.load_and_run_pass,
        LoadedPassInput(load=load, expected=expected, then=then),
    )
    assert loaded.snapshot == found
    assert (loaded.done is not None, bool(ran), len(kube.patches)) == (runs, runs, int(runs))
