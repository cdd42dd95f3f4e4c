"""Where a workflow's time goes, from its own history.

A regular activity costs four intervals the history records: waiting for a worker to
take it (scheduled to started), running (started to completed), then the workflow task
that reacts to the result waiting for the worker (scheduled to started) and running. A
pass runs its steps as local activities (but a forced resize's and the teardown): each
is a marker, and its run is part of the workflow task that ran it. The rest of a
workflow's lifetime is waiting on purpose (timers, signals).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

PARTS = ("activity_queue", "activity_run", "workflow_task_queue", "workflow_task_run")


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

    def add(self, events: Iterable[HistoryEvent]) -> None:
        events = list(events)
        self.local_activities += sum(1 for event in events if _local_activity(event))
        activity_scheduled: dict[int, float] = {}
        activity_started: dict[int, float] = {}
        task_scheduled = task_started = 0.0
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

    def per(self, instances: int) -> dict[str, float]:
        """Seconds of each part, activities and workflow tasks, per instance."""
        return {
            **{part: value / instances for part, value in self.seconds.items()},
            "activities": (self.activities + self.local_activities) / instances,
            "local_activities": self.local_activities / instances,
            "workflow_tasks": self.workflow_tasks / instances,
            "workflow_tasks_lost": self.workflow_tasks_lost / instances,
        }


LOCAL_ACTIVITY_MARKER = "core_local_activity"  # the marker sdk-core records for one

_ACTIVITY_ENDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
}


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
