"""What goes in and out of a DBInstance workflow: input, signals, updates, query.

None of these types has a field that could hold a password: results name Secrets,
never their contents.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from dbi.status import Summary
from dbi.steps import InstanceSnapshot, Outcome

# How long a workflow task may take (the watcher's start sets it, continue-as-new keeps
# it): a pass runs its steps as local activities inside one, and when many instances are
# applied at once their steps queue for the worker's threads. The SDK heartbeats a task
# whose local activities outlast 80 % of this; one that still outlasts it is lost, and
# its pass runs again (on a loaded machine, more of the load that made it late). The
# price: a task on a worker that died is retried after this long, not 10 s (the
# server's default).
TASK_TIMEOUT = timedelta(seconds=30)


class SeenInstance(InstanceSnapshot):
    """The instance as a wake carries it (``Wake.seen``): fields a newer watcher adds are
    ignored, so its wake still decodes (a signal that does not is dropped)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    @classmethod
    def of(cls, snapshot: InstanceSnapshot) -> SeenInstance:
        return cls.model_validate(snapshot.model_dump())

    def expected(self) -> InstanceSnapshot:
        """The snapshot a pass expects its load to find."""
        return InstanceSnapshot(
            **{name: getattr(self, name) for name in InstanceSnapshot.model_fields}
        )


class Wake(BaseModel):
    """A nudge from the watcher: something about the instance changed."""

    model_config = ConfigDict(frozen=True)

    reason: str = Field(max_length=200, description="Kind, name and event, for the history.")
    generation: int | None = Field(
        default=None, description="The DBInstance's generation, when the event was about it."
    )
    trace: dict[str, str] | None = Field(
        default=None,
        description="W3C trace context (traceparent) of the watcher's span: the pass this "
        "wake causes joins that trace.",
    )
    retry: bool = Field(
        default=False,
        description="A dbi.dev/ annotation of the DBInstance changed (dbi.dev/adopt, say): "
        "like the retry signal, it ends a Terminal wait.",
    )
    gone: bool = Field(
        default=False,
        description="The DBInstance was deleted: every wait ends, Terminal's too, and the "
        "next pass finds it gone and completes the workflow.",
    )
    settle: bool = Field(
        default=False,
        description="Nothing changed: a worker that started asks a Ready instance for its "
        "idle pass now, which settles it there (activities.worker.rechecks). Ends a Ready wait "
        "only, and the pass that follows is idle, as a health check's.",
    )
    seen: SeenInstance | None = Field(
        default=None,
        description="The DBInstance as the watcher's event showed it (dbi.stored.seen), "
        "when the wake announces it new or of a new generation: the pass it brings "
        "expects its load to find it so, and then runs with the load in one local activity.",
    )


class Carried(BaseModel):
    """The small state one workflow run hands to the next at continue-as-new."""

    uid: str | None = None
    woken: bool = False
    retry: bool = False
    signaled_generation: int = 0
    transient_streak: int = 0
    passes: int = 0
    summary: Summary | None = None


# How many events a run of the DBInstance workflow holds before it continues as new:
# about 20 idle passes (6.6 events each): two hours at a 5-minute interval where every
# check is the workflow's pass, some five days where the worker re-checks settled
# instances between them (activities.worker.rechecks, one pass every RECHECK_NET). A workflow
# the worker's cache does not hold replays its run at its next task, about 0.7 ms of
# CPU per event (docs/benchmarks.md), and at 10,000 settled instances with a
# cache of 3,000 every six-hourly pass is such a replay: the shorter the run, the
# cheaper that pass; a continue-as-new costs the next run a full pass and a settling
# one. A cached workflow's memory grows with its run too, some 5 KiB per idle pass.
# Runs that went on until the server suggested continuing (about 4,100 events)
# would reach 8 to 12 MiB per cached instance. The watcher starts each workflow with
# it, and a run continues as new with at most it.
RUN_EVENTS = 150
# What an input without ``history_limit`` means: the limit before RUN_EVENTS was
# lowered. Payloads leave out a field holding its default, so the default stays what
# the runs that recorded their input meant (tests/workflows/test_payload_defaults.py):
# a run begun with 300 replays as it ran, and hands RUN_EVENTS on.
RECORDED_RUN_EVENTS = 300
# A settled Ready instance's workflow waits this long for its own next pass while the
# worker that settled it re-checks it every healthCheckInterval and wakes it on any
# change (activities.worker.rechecks): the safety net for a worker that went away without
# handing its instances on (a stopping worker hands them on, a starting one asks every
# instance for a pass: activities.worker.rechecks), as controller-runtime's SyncPeriod (10 h)
# is a controller's. Each of these passes costs the Temporal server a workflow task,
# and the worker a replay of the run when its workflow is not cached: at 10,000
# instances, once an hour was 167 passes a minute (docs/benchmarks.md).
RECHECK_NET = timedelta(hours=6)
# A pass that waits on a transition the watcher announces (a VM starting) hands the
# worker its fallback look (activities.worker.rechecks, ``awaits``): its workflow waits this
# long for its own pass, a net for a worker that went away; the watcher's wake when the
# VM runs brings the pass long before. A booting VM's 30 s look was a workflow task, a
# timer and a marker of its own (docs/benchmarks.md).
AWAIT_NET = timedelta(minutes=5)


class WorkflowInput(BaseModel):
    """Start a DBInstance workflow (the watcher does, with signal-with-start)."""

    namespace: str
    name: str
    history_limit: int = Field(
        default=RECORDED_RUN_EVENTS,
        ge=50,
        description="Continue as new once the history holds this many events (or when "
        "the server suggests it); the watcher starts runs with RUN_EVENTS, and the next "
        "run holds at most RUN_EVENTS.",
    )
    carried: Carried | None = None


class RotationResult(BaseModel):
    """A rotation that is done: the Secret users read now holds a password that works."""

    secret_name: str
    resource_version: str
    rotated: bool = Field(
        description="False when this request had already been carried out (a retry)."
    )


class ResizeResult(BaseModel):
    """The end of a forced resize."""

    resized: bool
    reason: str
    message: str


class StepProgress(BaseModel):
    step: str
    outcome: Outcome
    reason: str
    message: str


class Progress(BaseModel):
    """What the workflow is doing: the answer of the progress query."""

    namespace: str
    name: str
    passes: int
    generation: int | None = Field(
        default=None, description="The DBInstance generation the last pass saw."
    )
    summary: Summary | None
    last_pass: list[StepProgress]
    waiting_for: str
    next_wakeup: datetime | None
    queued_requests: int


class RotationRequest(BaseModel):
    """Ask the rotation activity for a new app password; ``request_id`` makes it idempotent."""

    namespace: str
    name: str
    uid: str
    request_id: str
