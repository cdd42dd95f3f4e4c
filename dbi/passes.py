"""A pass as the workflow hands it to one activity: its steps, then its status, and,
for a pass that expects the instance unchanged, its load first (``run_pass``,
``load_and_run_pass``), whether it settles the instance, and the requests it served.
Plain data and pure functions; the worker's runner of them is
activities/worker/passes.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from dbi.models import Served
from dbi.pipeline import BACKUP, REPLICAS, RESIZE
from dbi.status import PassReport
from dbi.steps import InstanceSnapshot, Outcome, StepInput, StepResult, StepsInput, StepsResult


class StatusInput(BaseModel):
    """Ask the status activity to write one pass's status onto the instance."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    name: str
    uid: str
    pass_id: str = Field(
        default="",
        description="The pass the status is of: the activity starts from that pass's read "
        "of the instance when this worker process made it (activities.steps.loop.PassReads).",
    )
    report: PassReport
    generation_seen_at: datetime | None = Field(
        default=None,
        description="When the workflow's first pass saw the report's generation (metrics).",
    )


class PendingStatus(BaseModel):
    """A pass's status before its steps ran: written once they return (``after``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: StatusInput = Field(description="The status to write: its report without results.")
    requested: Served = Field(description="The requests the pass's load found unserved.")
    rotated: Served = Field(description="The rotations served before the pass.")

    def after(self, results: list[StepResult]) -> StatusInput:
        """The status of the pass once its steps returned ``results``."""
        report = finished(self.status.report, results, self.requested, self.rotated)
        return self.status.model_copy(update={"report": report})


class PassInput(BaseModel):
    """What the activity ``run_pass`` is given: a local pass's steps, run in one go
    (``activities.worker.passes.Passes.run_steps``), then its status, written as
    ``write_status`` writes it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: StepsInput
    then: PendingStatus
    settle: InstanceSnapshot | None = Field(
        default=None,
        description="What the pass's load found, when the pass may settle the instance "
        "(it has nothing to serve): every step Satisfied and the status written, the "
        "worker then re-checks it from its views as it does after an idle pass "
        "(activities.worker.rechecks, ``rechecked``).",
    )

    def rechecked(self, snapshot: InstanceSnapshot) -> LoadedPassInput:
        """This pass as a re-check repeats it: an idle pass's load, expecting
        ``snapshot``, and its steps read as an idle pass reads (the views)."""
        idle = self.steps.step_input.model_copy(update={"idle": True})
        load = StepInput(
            namespace=idle.namespace, name=idle.name, uid=idle.uid, pass_id=idle.pass_id, idle=True
        )
        steps = self.steps.model_copy(update={"step_input": idle})
        then = self.model_copy(update={"steps": steps, "settle": None})
        return LoadedPassInput(load=load, expected=snapshot, then=then)


class LoadedPassInput(BaseModel):
    """What the activity ``load_and_run_pass`` is given: a pass's load (an idle pass's,
    from the views, or a woken one's, afresh), the snapshot the workflow expects it to
    find (the last pass's) and the pass it means to run on that snapshot."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    load: StepInput
    expected: InstanceSnapshot
    then: PassInput

    def rechecked(self) -> LoadedPassInput:
        """This pass as a re-check repeats it: an idle pass reads from the views as it
        is; a woken one (its load and steps read afresh) is made to."""
        return self if self.load.idle else self.then.rechecked(self.expected)


class LoadedPass(BaseModel):
    """What ``load_and_run_pass`` found, and the steps it ran with the status written
    (``done``) when the snapshot was the one expected; None: nothing ran."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    snapshot: InstanceSnapshot
    done: StepsResult | None = None
    rechecked: bool = Field(
        default=False,
        description="The pass settled the instance and the worker re-checks it every "
        "healthCheckInterval (activities.worker.rechecks), waking the workflow when a re-check "
        "finds anything else: the workflow's own next pass comes RECHECK_NET later.",
    )


def then_write(
    pending: PendingStatus, done: StepsResult, write: Callable[[StatusInput], bool]
) -> StepsResult:
    """``run_pass``'s second half: once the steps ran (none raised), write the pass's
    status with ``write`` (False when it failed: the workflow writes it then)."""
    if done.raised is not None:
        return done
    return done.model_copy(update={"written": write(pending.after(done.results))})


def settled(loaded: LoadedPassInput, ran: LoadedPass) -> bool:
    """Whether the pass settled the instance: it ran on the snapshot ``loaded`` expects
    (``load_and_run_pass``'s load found it, or ``run_pass`` was given it), and every step
    of the pass ran to Satisfied with the status written."""
    done = ran.done
    if done is None or done.raised is not None or not done.written:
        return False
    steps = loaded.then.steps.steps
    return len(done.results) == len(steps) and all(
        r.outcome is Outcome.SATISFIED for r in done.results
    )


def awaits(loaded: LoadedPassInput, ran: LoadedPass) -> float | None:
    """When the pass waits on a transition the watcher announces: the look its step asks
    for as a fallback (its hint, in seconds), which the worker makes. That is, it ran on
    the snapshot ``loaded`` expects, every step before its last ran to Satisfied, the
    last is Pending and ``announced``, and the status was written. None for any other
    pass."""
    done = ran.done
    if done is None or done.raised is not None or not done.written or not done.results:
        return None
    *before, last = done.results
    waiting = last.outcome is Outcome.PENDING and last.announced
    if not (waiting and last.requeue_after_seconds):
        return None
    if any(r.outcome is not Outcome.SATISFIED for r in before):
        return None
    return last.requeue_after_seconds


def served(requested: Served, report: PassReport, rotated: Served) -> Served | None:
    """The requests a pass served: a reconcile by running; a restart once the resize step
    is Satisfied (the deferred resize applied, or none due) or the pass ends Terminal;
    a backup once the backup step, which starts it, is Satisfied; rotations once
    carried out (``rotated``)."""
    resize = next((r for r in report.results if r.step == RESIZE.name), None)
    backup = next((r for r in report.results if r.step == BACKUP.name), None)
    backup_done = backup is not None and backup.outcome is Outcome.SATISFIED
    replicas = next((r for r in report.results if r.step == REPLICAS.name), None)
    switched = replicas is not None and replicas.outcome is Outcome.SATISFIED
    blocking = report.blocking
    restart_done = (resize is not None and resize.outcome is Outcome.SATISFIED) or (
        blocking is not None and blocking.outcome is Outcome.TERMINAL
    )
    done = rotated.model_copy(
        update={
            "reconcile_requested_at": requested.reconcile_requested_at,
            "restart_requested_at": requested.restart_requested_at if restart_done else None,
            "backup_requested_at": requested.backup_requested_at if backup_done else None,
            "switchover_requested_at": requested.switchover_requested_at if switched else None,
        }
    )
    return done if done != Served() else None


def finished(
    report: PassReport, results: list[StepResult], requested: Served, rotated: Served
) -> PassReport:
    """The pass ``report`` begins (its results to come) once its steps returned
    ``results``, with the requests it served: the workflow's and ``run_pass``'s alike."""
    done = report.model_copy(update={"results": results})
    return done.model_copy(update={"served": served(requested, done, rotated)})
