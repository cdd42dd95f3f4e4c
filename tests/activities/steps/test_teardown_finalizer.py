"""teardown_finalizer's decision: the finalizer goes last, and the instance gone with it
is the proof (plain data)."""

from __future__ import annotations

from activities.steps import teardown_finalizer
from dbi import pipeline
from dbi.steps import Outcome


def test_the_finalizer_is_removed_then_the_instance_gone_is_the_proof() -> None:
    """With the finalizer there: remove it (Pending, look again at once); without it, or
    with the instance gone, Satisfied."""
    removing = teardown_finalizer.decide(teardown_finalizer.Observation(has_finalizer=True))
    assert removing.result.outcome is Outcome.PENDING
    assert removing.action is teardown_finalizer.Action.REMOVE
    done = teardown_finalizer.decide(teardown_finalizer.Observation(has_finalizer=False))
    assert (done.result.outcome, done.action) == (Outcome.SATISFIED, None)
    gone = teardown_finalizer.STEP.when_gone(pipeline.TEARDOWN_FINALIZER)
    assert gone.outcome is Outcome.SATISFIED
