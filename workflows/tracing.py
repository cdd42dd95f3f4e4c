"""Trace context inside the workflow: a pass a wake caused joins the wake's trace.

Temporal's TracingInterceptor parents each ``StartActivity`` span on the workflow's
current OpenTelemetry context. ``joined`` makes that the context the watcher put in
the ``wake`` signal, so one trace runs from the watcher's span through the pass to
each step's ``RunActivity`` span. It changes no command: replays are unaffected, and
the interceptor creates no span while replaying.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import opentelemetry.context
import opentelemetry.propagate
from temporalio.contrib.opentelemetry import workflow as otel_workflow

from dbi.status import PassReport


@contextmanager
def joined(carrier: dict[str, str] | None) -> Iterator[None]:
    """Run the block under the trace context in ``carrier`` (W3C), if there is one."""
    if not carrier:
        yield
        return
    current = opentelemetry.context.get_current()
    token = opentelemetry.context.attach(opentelemetry.propagate.extract(carrier, current))
    try:
        yield
    except GeneratorExit:
        # The workflow is evicted from the worker's cache: its coroutine is closed from
        # outside its task, and its context goes with it.
        raise
    except BaseException:
        opentelemetry.context.detach(token)
        raise
    opentelemetry.context.detach(token)


def pass_span(report: PassReport, instance: str) -> None:
    """Record the pass as a (zero-length) span in the current trace."""
    blocking = report.blocking
    attributes: dict[str, str | int] = {
        "dbi.instance": instance,
        "dbi.generation": report.generation,
        "dbi.outcome": report.outcome,
    }
    if blocking is not None:
        attributes["dbi.step"] = blocking.step
        attributes["dbi.reason"] = blocking.reason
    otel_workflow.completed_span("DBInstancePass", attributes=attributes)
