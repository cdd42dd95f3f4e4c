"""Where a workflow's time goes, read from a history built with plain data."""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from bench.profile import LOCAL_ACTIVITY_MARKER, Breakdown


def _event(
    event_id: int, kind: EventType.ValueType, second: float, **attributes: object
) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=kind, **attributes)  # type: ignore[arg-type]
    event.event_time.FromNanoseconds(int(second * 1e9))
    return event


def test_activities_and_local_activities_are_counted_and_timed() -> None:
    """A regular activity's queue and run times come from its events; a local activity
    (a health check's step) counts as an activity whose time is its workflow task's."""
    e = EventType
    history = [
        _event(1, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0.0),
        _event(2, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0.5),
        _event(3, e.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 0.6),
        _event(4, e.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 0.6),
        _event(
            5,
            e.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            0.8,
            activity_task_started_event_attributes={"scheduled_event_id": 4},
        ),
        _event(
            6,
            e.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
            1.8,
            activity_task_completed_event_attributes={"scheduled_event_id": 4},
        ),
        _event(7, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 1.8),
        _event(8, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 2.0),
        _event(9, e.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 3.0),
        *[
            _event(
                10 + n,
                e.EVENT_TYPE_MARKER_RECORDED,
                3.0,
                marker_recorded_event_attributes={"marker_name": LOCAL_ACTIVITY_MARKER},
            )
            for n in range(3)
        ],
        _event(
            13,
            e.EVENT_TYPE_MARKER_RECORDED,
            3.0,
            marker_recorded_event_attributes={"marker_name": "core_patch"},
        ),
    ]
    breakdown = Breakdown()
    breakdown.add(history)
    per = breakdown.per(1)
    assert per["activities"] == 4 and per["local_activities"] == 3
    assert per["workflow_tasks"] == 2
    assert round(per["activity_queue"], 3) == 0.2 and round(per["activity_run"], 3) == 1.0
    assert round(per["workflow_task_queue"], 3) == 0.7
    assert round(per["workflow_task_run"], 3) == 1.1


def test_workflow_tasks_the_server_gave_up_on_are_counted_apart() -> None:
    """A workflow task that timed out (its pass outlasted the task timeout) or failed is
    not a completed one: it is counted as lost, and its pass runs again."""
    e = EventType
    history = [
        _event(1, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 0.0),
        _event(2, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 0.1),
        _event(3, e.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, 10.1),
        _event(4, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 10.1),
        _event(5, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 10.2),
        _event(6, e.EVENT_TYPE_WORKFLOW_TASK_FAILED, 10.3),
        _event(7, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 10.3),
        _event(8, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 10.4),
        _event(9, e.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, 11.4),
    ]
    breakdown = Breakdown()
    breakdown.add(history)
    per = breakdown.per(1)
    assert per["workflow_tasks"] == 1 and per["workflow_tasks_lost"] == 2


def test_each_workflow_task_is_counted_by_what_brought_it() -> None:
    """The run's start (a wake it was started with is the start's), a timer, the
    watcher's wake, another signal, a lost task; an update's task has no event of its
    own before it (other)."""
    e = EventType

    def task(first: int, second: float) -> list[HistoryEvent]:
        return [
            _event(first, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, second),
            _event(first + 1, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, second),
            _event(first + 2, e.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, second),
        ]

    def signaled(event_id: int, name: str) -> HistoryEvent:
        return _event(
            event_id,
            e.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
            0.0,
            workflow_execution_signaled_event_attributes={"signal_name": name},
        )

    history = [
        _event(1, e.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, 0.0),
        signaled(2, "wake"),  # the watcher signals with start: the start's task
        *task(3, 0.0),
        _event(6, e.EVENT_TYPE_TIMER_STARTED, 0.0),
        _event(7, e.EVENT_TYPE_TIMER_FIRED, 1.0),
        *task(8, 1.0),
        signaled(11, "wake"),
        signaled(12, "wake"),  # two wakes, one task
        *task(13, 2.0),
        signaled(16, "retry"),
        _event(17, e.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, 3.0),
        _event(18, e.EVENT_TYPE_WORKFLOW_TASK_STARTED, 3.0),
        _event(19, e.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT, 13.0),
        *task(20, 13.0),
        *task(23, 14.0),  # an update's
    ]
    breakdown = Breakdown()
    breakdown.add(history)
    per = breakdown.per(1)
    woken = {k.removeprefix("woken_by_"): v for k, v in per.items() if k.startswith("woken_by_")}
    assert woken == {
        "start": 1,
        "timer": 1,
        "wake": 1,
        "signal": 1,
        "activity": 0,
        "lost": 1,
        "other": 1,
    }
    assert per["workflow_tasks"] == 5 and per["workflow_tasks_lost"] == 1


def test_fired_timers_are_counted_by_what_their_wait_was_for() -> None:
    """A fired timer counts under its wait's summary, durations left out; a timer the
    workflow cancelled (a wake ended the wait) counts nowhere."""
    e = EventType

    def started(event_id: int, summary: str) -> HistoryEvent:
        event = _event(event_id, e.EVENT_TYPE_TIMER_STARTED, 0.0)
        event.user_metadata.summary.data = f'"{summary}"'.encode()
        return event

    def fired(event_id: int, started_id: int) -> HistoryEvent:
        return _event(
            event_id,
            e.EVENT_TYPE_TIMER_FIRED,
            0.0,
            timer_fired_event_attributes={"started_event_id": started_id},
        )

    history = [
        started(1, "power pending (Starting): look again in 30s"),
        fired(2, 1),
        started(3, "power pending (Starting): look again in 30s"),
        fired(4, 3),
        started(5, "health pending (Booting): look again in 2s"),
        _event(6, e.EVENT_TYPE_TIMER_CANCELED, 0.0),
        started(7, "ready: re-check in 30s (+2s spread)"),
        fired(8, 7),
    ]
    breakdown = Breakdown()
    breakdown.add(history)
    timers = {k.removeprefix("timer: "): v for k, v in breakdown.per(2).items() if "timer: " in k}
    assert timers == {"power pending (Starting): look again in": 1, "ready: re-check in": 0.5}
