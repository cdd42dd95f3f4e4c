"""Every activity of a pass is an OpenTelemetry span, through Temporal's contrib interceptor."""

from __future__ import annotations

from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from tests.spans import EXPORTER
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World


async def test_each_step_activity_of_a_pass_is_a_span(time_env: WorkflowEnvironment) -> None:
    """A converged pass leaves one RunActivity span per step, in the workflow's trace."""
    EXPORTER.clear()
    world = World()
    async with running(time_env, world) as handle:
        await settled(handle, 1)
    # This workflow's: a worker of an earlier test may still finish a span after clear().
    spans = [
        s
        for s in EXPORTER.get_finished_spans()
        if s.name.startswith("RunActivity:")
        and (s.attributes or {}).get("temporalWorkflowID") == handle.id
    ]
    ran = [s.name for s in spans]
    for step in pipeline.CONVERGE:
        assert f"RunActivity:{step.name}" in ran
    traces = {s.context.trace_id for s in spans if s.context is not None}
    assert len(traces) == 1
