"""Where a workflow's time goes, from its own history.

A regular activity costs four intervals the history records: waiting for a worker to
take it (scheduled to started), running (started to completed), then the workflow task
that reacts to the result waiting for the worker (scheduled to started) and running. A
pass runs its steps as local activities (but a forced resize's and the teardown): each
is a marker, and its run is part of the workflow task that ran it. The rest of a
workflow's lifetime is waiting on purpose (timers, signals).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from dbi import names

PARTS = ("activity_queue", "activity_run", "workflow_task_queue", "workflow_task_run")

# What a workflow task is scheduled for, by the last event before it since the last
# one: the run's start (with the wake a signal-with-start brings), a timer (a wait's
# end), the watcher's wake, another signal (a request, a retry), a regular activity's
# end, a lost task scheduled again; else other (an update, which schedules its task
# with no event of its own).
CAUSES = ("start", "timer", "wake", "signal", "activity", "lost", "other")


@dataclass
class Breakdown:
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    activities: int = 0
    local_activities: int = 0
    workflow_tasks: int = 0
    # Workflow tasks the server gave up on (timed out: the worker did not complete them
    # in time) or the worker failed: each makes the worker replay the workflow and its
    # pass run again.
    workflow_tasks_lost: int = 0
    # What brought each workflow task (``CAUSES``): each is a pass's worth of work for
    # the Temporal server, whatever the worker then does in it.
    woken_by: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CAUSES, 0))
    # The watcher's wakes by what they were for: the kind and event of their reason
    # ("VirtualMachineInstance modified"), the object's name left out.
    wakes: Counter[str] = field(default_factory=Counter)
    # The timers that fired by what their wait was for: the wait's summary, its
    # durations left out ("health pending (Booting): look again in").
    timers: Counter[str] = field(default_factory=Counter)

    def add(self, events: Iterable[HistoryEvent]) -> None:
        events = list(events)
        self.local_activities += sum(1 for event in events if _local_activity(event))
        activity_scheduled: dict[int, float] = {}
        activity_started: dict[int, float] = {}
        task_scheduled = task_started = 0.0
        self._count_causes(events)
        for event in events:
            t = event.event_time.ToNanoseconds() / 1e9
            kind = event.event_type
            if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                activity_scheduled[event.event_id] = t
            elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                scheduled_id = event.activity_task_started_event_attributes.scheduled_event_id
                activity_started[scheduled_id] = t
                self.seconds["activity_queue"] += t - activity_scheduled[scheduled_id]
            elif kind in _ACTIVITY_ENDS:
                scheduled_id = _scheduled_id(event)
                if scheduled_id in activity_started:
                    self.seconds["activity_run"] += t - activity_started[scheduled_id]
                    self.activities += 1
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                task_scheduled = t
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                task_started = t
                self.seconds["workflow_task_queue"] += t - task_scheduled
            elif kind == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
                self.seconds["workflow_task_run"] += t - task_started
                self.workflow_tasks += 1
            elif kind in _TASKS_LOST:
                self.workflow_tasks_lost += 1

    def _count_causes(self, events: list[HistoryEvent]) -> None:
        cause = "other"
        started: dict[int, str] = {}
        for event in events:
            if event.event_type == EventType.EVENT_TYPE_TIMER_STARTED:
                started[event.event_id] = _summary(event)
            elif event.event_type == EventType.EVENT_TYPE_TIMER_FIRED:
                attributes = event.timer_fired_event_attributes
                self.timers[started.get(attributes.started_event_id, "")] += 1
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                self._count_wake(event)
            # the run's first task is its start's, the wake it was started with included
            cause = "start" if cause == "start" else _cause(event) or cause
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
                self.woken_by[cause] += 1
                cause = "other"

    def _count_wake(self, event: HistoryEvent) -> None:
        attributes = event.workflow_execution_signaled_event_attributes
        if attributes.signal_name != names.WAKE or not attributes.input.payloads:
            return
        reason = str(json.loads(attributes.input.payloads[0].data).get("reason", ""))
        words = reason.split()
        self.wakes[" ".join([words[0], words[-1]]) if len(words) > 2 else reason] += 1

    def per(self, instances: int) -> dict[str, float]:
        """Seconds of each part, activities and workflow tasks, per instance."""
        return {
            **{part: value / instances for part, value in self.seconds.items()},
            "activities": (self.activities + self.local_activities) / instances,
            "local_activities": self.local_activities / instances,
            "workflow_tasks": self.workflow_tasks / instances,
            "workflow_tasks_lost": self.workflow_tasks_lost / instances,
            **{f"woken_by_{c}": n / instances for c, n in self.woken_by.items()},
            **{f"wake: {r}": n / instances for r, n in self.wakes.most_common()},
            **{f"timer: {r}": n / instances for r, n in self.timers.most_common()},
        }


def _summary(event: HistoryEvent) -> str:
    """A timer's summary (what its wait was for) without its numbers."""
    payload = event.user_metadata.summary
    text = json.loads(payload.data) if payload.data else ""
    return re.sub(r"\s*\(?\+?\d+[smh]?( spread\))?", "", str(text)).strip()


LOCAL_ACTIVITY_MARKER = "core_local_activity"  # the marker sdk-core records for one

_ACTIVITY_ENDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
}


def _cause(event: HistoryEvent) -> str | None:
    kind = event.event_type
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        return "start"
    if kind == EventType.EVENT_TYPE_TIMER_FIRED:
        return "timer"
    if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        name = event.workflow_execution_signaled_event_attributes.signal_name
        return "wake" if name == names.WAKE else "signal"
    if kind in _ACTIVITY_ENDS:
        return "activity"
    if kind in _TASKS_LOST:
        return "lost"
    return None


_TASKS_LOST = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
}


def _local_activity(event: HistoryEvent) -> bool:
    return (
        event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
        and event.marker_recorded_event_attributes.marker_name == LOCAL_ACTIVITY_MARKER
    )


def _scheduled_id(event: HistoryEvent) -> int:
    attributes = getattr(event, _ACTIVITY_ENDS[event.event_type])
    return int(attributes.scheduled_event_id)
