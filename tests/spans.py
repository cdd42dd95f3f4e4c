"""One in-memory span exporter for the test process (the global TracerProvider can be set
once per process; Temporal's interceptor and dbi's tracers follow it)."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

EXPORTER = InMemorySpanExporter()
_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
trace.set_tracer_provider(_provider)


def finished() -> tuple[ReadableSpan, ...]:
    return EXPORTER.get_finished_spans()
