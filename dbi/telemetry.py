"""Process-wide telemetry for the worker and the watcher: traces, metrics, JSON logs.

- **Traces**: an OpenTelemetry TracerProvider whose exporter the standard variables
  choose: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console`` or ``none``; ``otlp`` when
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set,
  else ``none``), over HTTP or gRPC as ``OTEL_EXPORTER_OTLP_PROTOCOL`` says. The OTLP
  exporter reads its own ``OTEL_EXPORTER_OTLP_*`` variables;
  ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES`` name the resource.
- **Metrics**: one Prometheus endpoint (``DBI_METRICS_PORT``; none when unset) serving
  dbi's own metrics (``dbi.metrics``) and the Temporal SDK's runtime metrics, which
  Temporal's contrib ``MetricsExporter`` hands to OpenTelemetry's Prometheus reader,
  with the probes ``/livez`` and ``/readyz`` beside it (``dbi.health``).
- **Logs**: one JSON object per line with the instance, step and trace id
  (``DBI_LOG_FORMAT=text`` for the classic format).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import prometheus_client
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from pythonjsonlogger.json import JsonFormatter
from temporalio import activity, workflow
from temporalio.contrib.opentelemetry import MetricsExporter
from temporalio.runtime import MetricBuffer, Runtime, TelemetryConfig

from dbi import environment, names
from dbi import health as probes
from dbi.health import Health, HealthCollector

log = logging.getLogger("dbi.telemetry")

# The step running now, when an activity runs several (``run_pass``); else its type is.
STEP: ContextVar[str | None] = ContextVar("dbi_step", default=None)


def instance_of(workflow_id: str | None) -> str | None:
    """Return ``namespace/name`` for an instance's workflow id, else None."""
    found = names.instance_of(workflow_id or "")
    return "/".join(found) if found else None


class ContextFilter(logging.Filter):
    """Put ``instance``, ``step``, ``trace_id`` and ``span_id`` on every record.

    Inside an activity they come from its info (the workflow id names the instance,
    the activity type is the step, or ``STEP`` of one that runs several); a record may
    also carry ``instance`` itself
    (``extra={"instance": ...}``), as the watcher's do. Missing values are None.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        instance = getattr(record, "instance", None)
        step = getattr(record, "step", None)
        if activity.in_activity():
            info = activity.info()
            instance = instance or instance_of(info.workflow_id)
            step = step or STEP.get() or info.activity_type
        elif workflow := getattr(record, "temporal_workflow", None):
            instance = instance or instance_of(workflow.get("workflow_id"))
        span = trace.get_current_span().get_span_context()
        record.instance = instance
        record.step = step
        record.trace_id = format(span.trace_id, "032x") if span.is_valid else None
        record.span_id = format(span.span_id, "016x") if span.is_valid else None
        return True


JSON_FIELDS = ["asctime", "levelname", "name", "message", "instance", "step", "trace_id", "span_id"]


def json_formatter() -> logging.Formatter:
    return JsonFormatter(
        JSON_FIELDS,
        rename_fields={"asctime": "time", "levelname": "level", "name": "logger"},
        # Temporal's adapters add whole dicts of context; the fields above suffice.
        reserved_attrs=[*logging.LogRecord("", 0, "", 0, "", None, None).__dict__, "taskName"],
    )


def configure_logging(*, stream: Any = None) -> None:
    """Send INFO and above to ``stream`` (stderr) as JSON lines, or text if asked."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.addFilter(ContextFilter())
    if environment.LOG_FORMAT.get() == "text":
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s %(instance)s %(message)s")
        )
    else:
        handler.setFormatter(json_formatter())
        # The SDK's adapters also append their context to the message ("... ({'activity_id':
        # ...})"); a JSON line has it as a field (temporal_activity, temporal_workflow).
        activity.logger.activity_info_on_message = False
        workflow.logger.workflow_info_on_message = False
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)


def span_exporter() -> SpanExporter | None:
    """The exporter OTEL_TRACES_EXPORTER (or an OTLP endpoint) chooses; None: none."""
    chosen = environment.TRACES_EXPORTER.get()
    if chosen is None:
        endpoint = environment.OTLP_TRACES_ENDPOINT.get() or environment.OTLP_ENDPOINT.get()
        chosen = "otlp" if endpoint else "none"
    chosen = chosen.split(",")[0].strip()
    if chosen == "none":
        return None
    if chosen == "console":
        # One line per span, so a log file stays one JSON object per line.
        return ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + "\n")
    if chosen == "otlp":
        return _otlp()
    raise ValueError(f"OTEL_TRACES_EXPORTER: unknown exporter {chosen!r} (otlp, console, none)")


def _otlp() -> SpanExporter:
    """OTLP's exporter for the protocol OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL names; each
    reads its own OTEL_EXPORTER_OTLP_* variables (endpoint, headers, TLS)."""
    protocol = environment.OTLP_TRACES_PROTOCOL.get() or environment.OTLP_PROTOCOL.value()
    if protocol == "http/protobuf":
        return OTLPSpanExporter()
    if protocol == "grpc":
        return GrpcSpanExporter()
    raise ValueError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not http/protobuf or grpc "
        "(http/json is not supported)"
    )


def configure_tracing(service: str) -> TracerProvider:
    """Install the global TracerProvider for ``service``, exporting as OTEL_* asks."""
    resource = Resource.create({"service.name": environment.SERVICE_NAME.get() or service})
    provider = TracerProvider(resource=resource)
    exporter = span_exporter()
    if exporter is not None:
        processor = (
            SimpleSpanProcessor(exporter)
            if isinstance(exporter, ConsoleSpanExporter)
            else BatchSpanProcessor(exporter)
        )
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def metrics_port() -> int | None:
    return environment.METRICS_PORT.integer(high=65535)


@asynccontextmanager
async def process_telemetry(service: str, health: Health | None = None) -> AsyncIterator[Runtime]:
    """Set up logs, traces and the metrics endpoint (with the probes of ``health``:
    ``dbi.health``) for one process; yield the Temporal Runtime its client must use
    (its metrics reach the endpoint).

    Spans still buffered are flushed on the way out.
    """
    configure_logging()
    provider = configure_tracing(service)
    port = metrics_port()
    if port is None:
        yield Runtime(telemetry=TelemetryConfig())
        provider.shutdown()
        return
    health = health or Health()
    buffer = MetricBuffer(10_000)
    runtime = Runtime(telemetry=TelemetryConfig(metrics=buffer))
    meters = MeterProvider(metric_readers=[PrometheusMetricReader()])
    collector = HealthCollector(health)
    prometheus_client.REGISTRY.register(collector)
    server, thread = probes.serve(health, port)
    beating = asyncio.create_task(health.heartbeat())
    log.info("metrics at http://0.0.0.0:%d/metrics (probes: /livez, /readyz)", server.server_port)
    try:
        async with MetricsExporter(buffer, meters):
            yield runtime
    finally:
        beating.cancel()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
        prometheus_client.REGISTRY.unregister(collector)
        meters.shutdown()
        provider.shutdown()
