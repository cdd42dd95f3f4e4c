"""Spans leave over OTLP as OTEL_EXPORTER_OTLP_PROTOCOL says: HTTP (protobuf) or gRPC,
each to a receiver on this machine that decodes what arrives."""

from __future__ import annotations

import http.server
from collections.abc import Iterator
from concurrent import futures
from contextlib import contextmanager
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from dbi import telemetry
from tests.httpfake import serving

Received = list[str]  # span names


def names(request: trace_service_pb2.ExportTraceServiceRequest) -> list[str]:
    return [
        span.name
        for resource in request.resource_spans
        for scope in resource.scope_spans
        for span in scope.spans
    ]


@contextmanager
def http_receiver() -> Iterator[tuple[str, Received]]:
    received: Received = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                received.extend(names(trace_service_pb2.ExportTraceServiceRequest.FromString(body)))
            self.send_response(200 if self.path == "/v1/traces" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as url:
        yield url, received


@contextmanager
def grpc_receiver() -> Iterator[tuple[str, Received]]:
    received: Received = []

    class Collector(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(
            self, request: trace_service_pb2.ExportTraceServiceRequest, context: Any
        ) -> trace_service_pb2.ExportTraceServiceResponse:
            received.extend(names(request))
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", received
    finally:
        server.stop(grace=None)


@pytest.mark.parametrize(
    ("protocol", "receiver"), [("http/protobuf", http_receiver), ("grpc", grpc_receiver)]
)
def test_spans_reach_a_collector_over_the_protocol_asked(
    protocol: str, receiver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with receiver() as (endpoint, received):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        exporter = telemetry.span_exporter()
        assert exporter is not None
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("test").start_as_current_span("dbi-step health"):
            pass
        provider.shutdown()
        assert received == ["dbi-step health"]


def test_an_unknown_protocol_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json'"):
        telemetry.span_exporter()
