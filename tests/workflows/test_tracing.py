"""Every activity of a pass is an OpenTelemetry span, through Temporal's contrib interceptor."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.testing import WorkflowEnvironment

from dbi import pipeline
from tests.workflows.conftest import running, settled
from tests.workflows.stubs import World

EXPORTER = InMemorySpanExporter()


def _provider() -> None:
    # The global provider can be set once per process; the interceptor's proxy
    # tracer follows it.
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)


_provider()


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
