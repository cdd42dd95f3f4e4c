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
    spans = EXPORTER.get_finished_spans()
    ran = [s.name for s in spans if s.name.startswith("RunActivity:")]
    for step in pipeline.CONVERGE:
        assert f"RunActivity:{step.name}" in ran
    traces = {s.context.trace_id for s in spans if s.name.startswith("RunActivity:")}
    assert len(traces) == 1
