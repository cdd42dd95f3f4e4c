"""Each step activity's span attributes and metrics, as a worker interceptor.

It runs inside the ``RunActivity`` span of Temporal's TracingInterceptor. A step that
returns puts ``dbi.instance``, ``dbi.step``, ``dbi.outcome`` and ``dbi.reason`` on that
span and counts the result; one that raises records the exception on the span (its
detail lives there, in the activity's failure and in logs, never in a condition
message) and is counted as outcome ``error``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from kubernetes import client as k8s
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from temporalio import activity
from temporalio.worker import ActivityInboundInterceptor, ExecuteActivityInput, Interceptor

from activities import kube
from dbi import metrics
from dbi.steps import StepResult
from dbi.telemetry import instance_of

log = logging.getLogger("dbi.worker")


class StepTelemetry(Interceptor):
    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _Inbound(next)


class _Inbound(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        step = info.activity_type
        span = trace.get_current_span()
        span.set_attribute("dbi.step", step)
        if instance := instance_of(info.workflow_id):
            span.set_attribute("dbi.instance", instance)
        started = time.monotonic()
        try:
            result = await super().execute_activity(input)
        except Exception as e:
            span.record_exception(e)
            span.set_status(Status(StatusCode.ERROR, type(e).__name__))
            span.set_attribute("dbi.outcome", "error")
            metrics.STEP_OUTCOMES.labels(step, "error", type(e).__name__).inc()
            log.warning("step %s attempt %d raised %s", step, info.attempt, _summary(e))
            raise
        finally:
            metrics.STEP_SECONDS.labels(step).observe(time.monotonic() - started)
        if isinstance(result, StepResult):
            span.set_attributes({"dbi.outcome": result.outcome.value, "dbi.reason": result.reason})
            metrics.STEP_OUTCOMES.labels(step, result.outcome.value, result.reason).inc()
        return result


def _summary(e: Exception) -> str:
    """What a log line says of an error: the API server's message for a Kubernetes call,
    else only the class (other messages are not known to be free of secrets)."""
    if isinstance(e, k8s.ApiException):
        return f"{type(e).__name__} ({kube.api_error(e)})"
    return type(e).__name__
