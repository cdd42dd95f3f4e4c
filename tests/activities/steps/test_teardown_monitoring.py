"""teardown_monitoring's decision (plain data)."""

from __future__ import annotations

from activities.infra import ownership
from activities.steps import teardown_monitoring
from dbi.steps import Outcome


def test_the_instances_metrics_objects_are_deleted_until_none_is_left() -> None:
    """Its own metrics objects are deleted (Pending); none left: Satisfied."""
    service = ownership.Child("Service", "db-metrics", {})
    deleting = teardown_monitoring.decide(teardown_monitoring.Observation(ours=(service,)))
    assert (deleting.result.reason, deleting.action) == (
        "Removing",
        teardown_monitoring.Action.DELETE,
    )
    done = teardown_monitoring.decide(teardown_monitoring.Observation(ours=()))
    assert (done.result.outcome, done.action) == (Outcome.SATISFIED, None)
