"""Every activity of a pass is an OpenTelemetry span, through Temporal's contrib
interceptor, and each step the pass's ``run_pass`` runs is a span inside it."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from tests.spans import EXPORTER
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World


async def test_each_step_of_a_pass_is_a_span(time_env: WorkflowEnvironment) -> None:
    """A converged pass leaves a RunActivity span for the load and one for the steps with
    the status write, and, under the steps' one, a RunStep span per step naming its
    outcome; all in the workflow's trace."""
    EXPORTER.clear()
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
    # This workflow's: a worker of an earlier test may still finish a span after clear().
    spans = [
        s
        for s in EXPORTER.get_finished_spans()
        if (s.attributes or {}).get("temporalWorkflowID") == handle.id
    ]
    activities = {s.name: s for s in spans if s.name.startswith("RunActivity:")}
    names = (pipeline.LOAD_INSTANCE, pipeline.RUN_PASS)
    assert {f"RunActivity:{name}" for name in names} <= set(activities)
    run_pass = activities[f"RunActivity:{pipeline.RUN_PASS}"]
    assert run_pass.context is not None
    traces = {s.context.trace_id for s in activities.values() if s.context is not None}
    steps = {
        s.name: s
        for s in EXPORTER.get_finished_spans()
        if s.parent is not None and s.parent.span_id == run_pass.context.span_id
    }
    for step in pipeline.CONVERGE:
        span = steps[f"RunStep:{step.name}"]
        assert (span.attributes or {})["dbi.step"] == step.name
        assert (span.attributes or {})["dbi.outcome"] == "Satisfied"
        assert span.context is not None
        traces.add(span.context.trace_id)
    assert len(traces) == 1
