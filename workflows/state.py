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
# workflow task (3), two local activities' markers (one when it runs with its load),
# its timer started and cancelled (8); an idle pass's is 6. A run reads its length only
# where a timer fired and counts each pass since the read as this many events.
PASS_EVENTS = 10


@dataclass(frozen=True)
class HistoryRead:
    """What a run read of its history (its length, the server's continue-as-new
    suggestion), and after how many passes."""

    length: int
    suggested: bool
    passes: int

    def too_long(self, *, limit: int, passes: int) -> bool:
        """Whether the run continues as new after pass number ``passes``: the server
        suggested it, or its history holds ``limit`` events, as read plus PASS_EVENTS
        for each pass since the read."""
        since = passes - self.passes
        return self.length + since * PASS_EVENTS >= limit or self.suggested


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
    # This pass settled the instance: the worker re-checks it (activities.rechecks).
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
    # The history's length, the server's continue-as-new suggestion and the pass count,
    # as read where a replay reads the same: the run's start and the end of each wait
    # its timer ended (None before the first read).
    history_read: HistoryRead | None = None

    @classmethod
    def of(cls, input: WorkflowInput) -> State:
        carried = input.carried or Carried()
        return cls(
            namespace=input.namespace,
            name=input.name,
            carried=carried,
            streaks=Streaks(transient=carried.transient_streak),
        )

    def handed_on(self) -> Carried:
        """What a new run starts from."""
        return self.carried.model_copy(update={"transient_streak": self.streaks.transient})
