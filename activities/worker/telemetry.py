"""Each step's span attributes and metrics: for a step run as its own activity, a worker
interceptor; for the steps ``run_pass`` (or ``load_and_run_pass``) runs one after the
other, a span of each.

The interceptor runs inside the ``RunActivity`` span of Temporal's TracingInterceptor;
``run_pass`` opens a ``RunStep:<step>`` span for each step inside its own. A step that
returns puts ``dbi.instance``, ``dbi.step``, ``dbi.outcome`` and ``dbi.reason`` on its
span and counts the result; one that raises records the exception on the span (its
detail lives there, in the activity's failure and in logs, never in a condition
message) and is counted as outcome ``error``. Log records made while a step runs name
it (``dbi.telemetry.STEP``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities.infra import kube
from dbi import metrics, pipeline
from dbi.steps import StepInput, StepResult
from dbi.telemetry import STEP, instance_of

log = logging.getLogger("dbi.worker")
tracer = trace.get_tracer("dbi.worker")
# The activities that run a pass's steps one after the other.
RUNNERS = frozenset({pipeline.RUN_PASS, pipeline.LOAD_AND_RUN_PASS})


class StepTelemetry(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        step = info.activity_type
        if step in RUNNERS:  # each of its steps is measured (``measured``)
            return await super().execute_activity(input)
        span = trace.get_current_span()
        _started(span, step)
        started = time.monotonic()
        try:
            result = await super().execute_activity(input)
        except Exception as e:
            _raised(span, step, e)
            raise
        finally:
            metrics.STEP_SECONDS.labels(step).observe(time.monotonic() - started)
        if isinstance(result, StepResult):
            _returned(span, step, result)
        return result


def measured(
    run: Callable[[str, StepInput], StepResult],
) -> Callable[[str, StepInput], StepResult]:
    """``run`` (a step by name) for the steps a runner runs: each in a span of its
    own, measured and counted as a step's activity is, its log records naming it."""

    def one(step: str, step_input: StepInput) -> StepResult:
        with tracer.start_as_current_span(
            f"RunStep:{step}", record_exception=False, set_status_on_exception=False
        ) as span:
            _started(span, step)
            token = STEP.set(step)
            started = time.monotonic()
            try:
                result = run(step, step_input)
            except Exception as e:
                _raised(span, step, e)
                raise
            finally:
                metrics.STEP_SECONDS.labels(step).observe(time.monotonic() - started)
                STEP.reset(token)
            _returned(span, step, result)
            return result

    return one


def _started(span: Span, step: str) -> None:
    span.set_attribute("dbi.step", step)
    if instance := instance_of(activity.info().workflow_id):
        span.set_attribute("dbi.instance", instance)


def _raised(span: Span, step: str, e: Exception) -> None:
    span.record_exception(e)
    span.set_status(Status(StatusCode.ERROR, type(e).__name__))
    span.set_attribute("dbi.outcome", "error")
    metrics.STEP_OUTCOMES.labels(step, "error", type(e).__name__).inc()
    log.warning("step %s attempt %d raised %s", step, activity.info().attempt, _summary(e))


def _returned(span: Span, step: str, result: StepResult) -> None:
    span.set_attributes({"dbi.outcome": result.outcome.value, "dbi.reason": result.reason})
    metrics.STEP_OUTCOMES.labels(step, result.outcome.value, result.reason).inc()


def _summary(e: Exception) -> str:
    """What a log line says of an error: the API server's message for a Kubernetes call,
    else only the class (other messages are not known to be free of secrets)."""
    if isinstance(e, k8s.ApiException):
        return f"{type(e).__name__} ({kube.api_error(e)})"
    return type(e).__name__
