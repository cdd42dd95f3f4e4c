"""What a DBInstance workflow remembers between passes (workflow code, no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from dbi.messages import Carried, WorkflowInput
    from dbi.spec import PowerState
    from dbi.status import PassReport
    from dbi.steps import InstanceSnapshot
    from workflows.requests import Requests
    from workflows.waiting import Streaks


# What a pass adds to a run's history, at most as a rule: a woken pass's wake, its
# workflow task (3), two local activities' markers, its timer started and cancelled
# (8); an idle pass's is 6. A run begun before HISTORY_TALLY reads its length where a
# timer fired and counts each pass since the read as this many events.
PASS_EVENTS = 10
# A run counts what it adds to its history (``Tally``) instead of reading its length
# (docs/engine.md, "Lifetime"): asked at the run's start, as every patch is.
HISTORY_TALLY = "history-tally"
# A run begun with this patch runs the settings step at the end of every converging pass.
SETTINGS_STEP = "settings-step"
# What a pass adds besides its activities: the wait before it (its timer started and
# fired) and the workflow task that ended it (3); a woken pass's wake is one more.
PASS_OVERHEAD = 5


@dataclass(frozen=True)
class HistoryRead:
    """What a run begun before HISTORY_TALLY read of its history (its length, the
    server's continue-as-new suggestion), and after how many passes."""

    length: int
    suggested: bool
    passes: int

    @classmethod
    def now(cls, *, passes: int) -> HistoryRead:
        info = workflow.info()
        return cls(
            length=info.get_current_history_length(),
            suggested=info.is_continue_as_new_suggested(),
            passes=passes,
        )

    def too_long(self, *, limit: int, passes: int) -> bool:
        """Whether the run continues as new after pass number ``passes``: the server
        suggested it, or its history holds ``limit`` events, as read plus PASS_EVENTS
        for each pass since the read."""
        since = passes - self.passes
        return self.length + since * PASS_EVENTS >= limit or self.suggested


@dataclass
class Tally:
    """The events a run has added to its history, counted from what replays the same.

    Never the history's length, the server's suggestion, or anything a signal changed:
    a replay may group a run's events into workflow tasks other than the run did. When
    a query rides on a task while a local activity runs, the worker completes the task
    without the activity's marker and the code sees the result in the next task, after
    that task's signals, while a replay applies the two as one and reads the second's
    length. What replays the same is the run's commands: its passes and the activities
    each ran. A pass counts the wait before it and the workflow task that ended it
    (``PASS_OVERHEAD``) and its activities; so an idle pass counts what it adds, a
    woken one its wake less, and signals that arrive while a pass runs go uncounted.
    """

    # Started, and the first workflow task's scheduled and started.
    events: int = 3

    def patched(self) -> None:
        self.events += 2  # the patch's marker, and the SDK's TemporalChangeVersion upsert

    def activities(self, count: int = 1, *, local: bool) -> None:
        """A local activity's marker, or an activity's scheduled, started and completed
        and the workflow task its result brings."""
        self.events += count * (1 if local else 6)

    def rotations(self, count: int) -> None:
        """Rotations served: each an activity, and the update that asked for it
        (accepted, completed) if one did."""
        self.events += count * 8

    def passed(self) -> None:
        self.events += PASS_OVERHEAD


@dataclass
class State:
    """Everything the workflow remembers. ``carried`` is the part continue-as-new hands
    on (the instance's UID, a pending wake or retry, the highest signaled generation, the
    pass count, the last summary), with the Transient streak taken from ``streaks``."""

    namespace: str
    name: str
    carried: Carried
    streaks: Streaks
    # The wait that just ended was a Ready instance's health-check timer.
    health_check: bool = False
    # This pass settled the instance: the worker re-checks it (activities.worker.rechecks).
    rechecked: bool = False
    # A worker that started asks for an idle pass now (Wake.settle).
    settle: bool = False
    deleting: bool = False
    # What the last pass's load saw of spec.powerState (None: no pass yet in this run).
    power_state: PowerState | None = None
    last_report: PassReport | None = None
    # What the last pass's load saw (None: no pass yet in this run).
    last_snapshot: InstanceSnapshot | None = None
    # What the newest wake since the last load showed of the instance (Wake.seen).
    seen: InstanceSnapshot | None = None
    waiting_for: str = "the first pass"
    next_wakeup: datetime | None = None
    requests: Requests = field(default_factory=Requests)
    # The trace of the wake that caused the next pass, and when a pass first saw the
    # current generation.
    trace: dict[str, str] | None = None
    generation_seen: tuple[int, datetime] | None = None
    # What the run has added to its history (a run begun with HISTORY_TALLY).
    tally: Tally = field(default_factory=Tally)
    # A run begun before HISTORY_TALLY: the history's length, the server's suggestion
    # and the pass count, as read at the run's start and where a timer ended a wait
    # (None in a run that counts its history).
    history_read: HistoryRead | None = None
    # A run begun with SETTINGS_STEP (its passes end with the settings step).
    settings_step: bool = False

    @classmethod
    def of(cls, input: WorkflowInput) -> State:
        carried = input.carried or Carried()
        return cls(
            namespace=input.namespace,
            name=input.name,
            carried=carried,
            streaks=Streaks(transient=carried.transient_streak),
        )

    def too_long(self, limit: int) -> bool:
        """Whether the run's history holds ``limit`` events: as counted (``tally``), or
        for a run begun before HISTORY_TALLY, as last read plus PASS_EVENTS a pass."""
        if self.history_read is None:
            return self.tally.events >= limit
        return self.history_read.too_long(limit=limit, passes=self.carried.passes)

    def handed_on(self) -> Carried:
        """What a new run starts from."""
        return self.carried.model_copy(update={"transient_streak": self.streaks.transient})
