"""Traces of real instances: one trace from the watcher's wake to each step, and a failing
step's error on its span while the condition's message stays stable."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from collections import defaultdict
from typing import Any

import pytest
from kubernetes import client as k8s
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode
from prometheus_client import REGISTRY

from dbi import names, pipeline, telemetry
from dbi.messages import Progress
from tests.orchestrator import Orchestrator
from tests.polling import until_awaited
from tests.spans import EXPORTER, finished
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

SPEC = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "healthCheckInterval": "10s",
}


def by_trace(spans: tuple[ReadableSpan, ...]) -> dict[int, list[ReadableSpan]]:
    traces: dict[int, list[ReadableSpan]] = defaultdict(list)
    for span in spans:
        assert span.context is not None
        traces[span.context.trace_id].append(span)
    return traces


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


async def test_a_change_is_one_trace_from_the_watcher_to_each_step(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    """A spec patch: the watcher's wake span, the pass, its one activity and every
    step's span in it share a trace; each step's span names the instance, step, outcome
    and reason."""
    orchestrator.apply(namespace, "db", SPEC)
    await asyncio.to_thread(orchestrator.wait_ready, namespace, "db")
    EXPORTER.clear()
    await asyncio.to_thread(orchestrator.patch, namespace, "db", {"healthCheckInterval": "11s"})
    generation = orchestrator.get(namespace, "db")["metadata"]["generation"]
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))

    async def converged() -> bool:
        progress = await handle.query("progress", result_type=Progress)
        summary = progress.summary
        return bool(progress.generation == generation and summary and summary.ready)

    await until_awaited(converged, timeout=60, what="the patched generation")
    instance = f"{namespace}/db"

    def complete_trace() -> list[ReadableSpan] | None:
        for spans in by_trace(finished()).values():
            wakes = [
                s
                for s in spans
                if s.name == "dbi.wake"
                and attributes(s).get("dbi.instance") == instance
                and attributes(s).get("dbi.generation") == generation
            ]
            passes = [
                s
                for s in spans
                if s.name == "DBInstancePass"
                and attributes(s).get("dbi.generation") == generation
                and attributes(s).get("dbi.outcome") == "Converged"
            ]
            ran = {s.name for s in spans}
            steps = {f"RunStep:{step.name}" for step in pipeline.CONVERGE}
            if wakes and passes and steps <= ran:
                return spans
        return None

    spans = await orchestrator.until(complete_trace, timeout=30, what="one complete trace")
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    wake = next(s for s in spans if s.name == "dbi.wake")
    for step in pipeline.CONVERGE:
        run = next(s for s in spans if s.name == f"RunStep:{step.name}")
        expected = {"dbi.instance": instance, "dbi.step": step.name, "dbi.outcome": "Satisfied"}
        assert attributes(run).items() >= expected.items()
        assert attributes(run)["dbi.reason"]
        # A step's span is in the RunActivity of the pass's one local activity (the
        # wake showed the new generation: its load found it so, and ran the steps),
        # whose parent is the workflow's StartActivity, whose parent is the wake.
        assert run.parent is not None
        activity = by_id[run.parent.span_id]
        assert activity.name == f"RunActivity:{pipeline.LOAD_AND_RUN_PASS}"
        assert activity.parent is not None
        start = by_id[activity.parent.span_id]
        assert start.name == f"StartActivity:{pipeline.LOAD_AND_RUN_PASS}"
        assert start.parent is not None and wake.context is not None
        assert start.parent.span_id == wake.context.span_id


async def test_a_failing_step_records_its_error_on_the_span_not_in_the_condition(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A ResourceQuota forbids Secrets: CredentialsReady says Forbidden with a stable
    message, while the credentials step's span records the API's refusal (an exception
    event, status ERROR), its Forbidden count moves and the log says what was refused."""
    core = k8s.CoreV1Api(kube_api)
    quota = k8s.V1ResourceQuota(
        metadata=k8s.V1ObjectMeta(name="no-secrets"),
        spec=k8s.V1ResourceQuotaSpec(hard={"secrets": "0"}),
    )
    core.create_namespaced_resource_quota(namespace, quota)
    # The local stack runs no quota controller: write the usage it would.
    usage = {"hard": {"secrets": "0"}, "used": {"secrets": "0"}}
    core.patch_namespaced_resource_quota_status("no-secrets", namespace, {"status": usage})

    def failed() -> tuple[str, str] | None:
        found = orchestrator.condition(namespace, "db", "CredentialsReady")
        return found if found and found[1] == "Forbidden" else None

    outcomes_before = step_outcomes("credentials", "Forbidden")
    EXPORTER.clear()
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.addFilter(telemetry.ContextFilter())
    handler.setFormatter(telemetry.json_formatter())
    logging.getLogger().addHandler(handler)
    try:
        orchestrator.apply(namespace, "db", SPEC)
        await orchestrator.until(failed, timeout=60, what="CredentialsReady Forbidden")
    finally:
        logging.getLogger().removeHandler(handler)

    condition = next(
        c
        for c in orchestrator.get(namespace, "db")["status"]["conditions"]
        if c["type"] == "CredentialsReady"
    )
    assert condition["message"] == (
        "The API server refused a request (403: RBAC, a quota or an admission policy); "
        "retrying with back-off. The worker's log names the request."
    )
    runs = [
        s
        for s in finished()
        # The step's span: in run_pass, or its own activity's when the pass goes on alone.
        if s.name in {"RunStep:credentials", "RunActivity:credentials"}
        and attributes(s).get("dbi.instance") == f"{namespace}/db"
    ]
    assert runs, "no span for the credentials step"
    for run in runs:
        assert run.status.status_code is StatusCode.ERROR
        assert (attributes(run)["dbi.outcome"], attributes(run)["dbi.reason"]) == (
            "Transient",
            "Forbidden",
        )
        exceptions = [e for e in run.events if e.name == "exception"]
        assert exceptions, "the error is not recorded on the span"
        detail = str(dict(exceptions[0].attributes or {}))
        assert "quota" in detail.lower()
    assert step_outcomes("credentials", "Forbidden") - outcomes_before >= len(runs)
    # The worker's log lines about the failure are JSON naming the instance, the step and
    # the span's trace.
    records = [json.loads(line) for line in lines.getvalue().splitlines()]
    instance = f"{namespace}/db"
    about = [r for r in records if r["instance"] == instance and r["step"] == "credentials"]
    traced = {r["trace_id"] for r in about if r["trace_id"]}
    assert traced, "no log line names the instance, the step and a trace"
    assert traced <= {format(run.context.trace_id, "032x") for run in runs if run.context}
    # and say what the API server refused, in its own words.
    assert any(
        "403 Forbidden: " in r["message"] and "exceeded quota" in r["message"] for r in about
    )


def step_outcomes(step: str, reason: str) -> float:
    """dbi_step_outcomes_total{step, outcome="Transient", reason}."""
    return sum(
        sample.value
        for family in REGISTRY.collect()
        if family.name == "dbi_step_outcomes"
        for sample in family.samples
        if sample.name == "dbi_step_outcomes_total"
        and sample.labels.get("step") == step
        and sample.labels.get("outcome") == "Transient"
        and sample.labels.get("reason") == reason
    )
