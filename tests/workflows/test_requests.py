"""Which annotation requests a pass served (plain data)."""

from __future__ import annotations

from dbi import pipeline
from dbi.models import Served
from dbi.passes import served
from dbi.spec import PowerState
from dbi.status import PassReport
from dbi.steps import Outcome
from workflows.requests import annotation_request_id

STEPS = [s.reported for s in pipeline.CONVERGE]
ASKED = Served(
    reconcile_requested_at="r1",
    restart_requested_at="s1",
    rotate_requested_at="t1",
    rotate_admin_requested_at="a1",
)
ROTATED = Served(rotate_requested_at="t1", rotate_admin_requested_at="a1")


def report(*outcomes: tuple[str, Outcome]) -> PassReport:
    spec = {s.name: s for s in pipeline.CONVERGE}
    results = [spec[name].result(outcome, "Ok", "Said.") for name, outcome in outcomes]
    return PassReport(
        workflow_id="w",
        generation=1,
        power_state=PowerState.RUNNING,
        pipeline=STEPS,
        results=results,
    )


def test_a_restart_is_served_once_the_resize_step_is_satisfied() -> None:
    """A pass held before the resize step serves the reconcile (it ran) but not the
    restart; the pass whose resize step is Satisfied serves it; a rotation is served only
    when the workflow carried it out."""
    before_resize = report(("preflight", Outcome.SATISFIED), ("vm", Outcome.PENDING))
    assert served(ASKED, before_resize, Served()) == Served(reconcile_requested_at="r1")
    through = [(s.name, Outcome.SATISFIED) for s in pipeline.CONVERGE]
    assert served(ASKED, report(*through), ROTATED) == ASKED
    stalled = report(("preflight", Outcome.TERMINAL))
    assert served(ASKED, stalled, Served()) == Served(
        reconcile_requested_at="r1", restart_requested_at="s1"
    )
    assert served(Served(), report(*through), Served()) is None


def test_one_rotation_request_per_annotation_value() -> None:
    assert annotation_request_id("a") == annotation_request_id("a")
    assert annotation_request_id("a") != annotation_request_id("b")
