"""monitoring (MonitoringReady): a Service for the exporter and a ServiceMonitor.

When enabled: the Service ``<name>-metrics`` (selecting the VM's pods by the instance
label) and a ServiceMonitor for it, applied when missing or different (Pending), then
Satisfied. Either name held by an object that is not the instance's stops the step
(``activities.ownership``). A cluster without the ServiceMonitor API gets the Service
only, and says so in the reason (no failure loop). When disabled: both are deleted (Pending), then
Satisfied.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client as k8s
from temporalio import activity

from activities import manifests, ownership
from activities.context import AT_ONCE, Context, Step, result
from activities.kube import Instance, Manifest
from dbi import names
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "monitoring", "MonitoringReady"
MONITORING = ("monitoring.coreos.com", "v1")


class Reason(StrEnum):
    READY = "MonitoringReady"
    NO_SERVICE_MONITOR_API = "ServiceMonitorUnavailable"
    APPLIED = "MonitoringApplied"
    DISABLED = "Disabled"
    REMOVED = "MonitoringRemoved"


def service_name(instance: Instance) -> str:
    return f"{instance.name}-metrics"


def service(instance: Instance, port: int) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": instance.child_metadata(service_name(instance)),
        "spec": {
            "selector": {names.INSTANCE_LABEL: instance.name},
            "ports": [{"name": "metrics", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def service_monitor(instance: Instance) -> Manifest:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": instance.child_metadata(service_name(instance)),
        "spec": {
            "selector": {"matchLabels": {names.INSTANCE_LABEL: instance.name}},
            "endpoints": [{"port": "metrics", "interval": "30s"}],
        },
    }


@dataclass(frozen=True)
class Observation:
    enabled: bool
    service_ok: bool
    service_exists: bool
    monitor_api: bool
    monitor_ok: bool
    monitor_exists: bool
    children: tuple[ownership.Child, ...] = ()


def decide(obs: Observation) -> StepResult:
    """Return the outcome (pure); Pending means the step wrote or deleted something."""
    if not obs.enabled:
        if obs.service_exists or obs.monitor_exists:
            return result(
                STEP,
                CONDITION,
                Outcome.PENDING,
                Reason.REMOVED,
                "Monitoring is disabled; its objects were deleted.",
                requeue_after=AT_ONCE,
            )
        return result(
            STEP, CONDITION, Outcome.SATISFIED, Reason.DISABLED, "Monitoring is disabled."
        )
    if not obs.service_ok or (obs.monitor_api and not obs.monitor_ok):
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.APPLIED,
            "The metrics Service and ServiceMonitor were applied.",
            requeue_after=AT_ONCE,
        )
    if not obs.monitor_api:
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.NO_SERVICE_MONITOR_API,
            "The metrics Service exists; the cluster has no ServiceMonitor API, so "
            "Prometheus Operator will not scrape it.",
        )
    return result(
        STEP,
        CONDITION,
        Outcome.SATISFIED,
        Reason.READY,
        "The metrics Service and ServiceMonitor exist.",
    )


def _service(ctx: Context, instance: Instance) -> Manifest | None:
    try:
        found = ctx.kube.core.read_namespaced_service(service_name(instance), instance.namespace)
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise
    return dict(ctx.kube.api.sanitize_for_serialization(found))


def _monitor(ctx: Context, instance: Instance) -> tuple[bool, Manifest | None]:
    """Return whether the cluster serves the ServiceMonitor API, and the object if any."""
    groups = k8s.ApisApi(ctx.kube.api).get_api_versions().groups or []
    if not any(g.name == MONITORING[0] for g in groups):
        return False, None
    return True, ctx.kube.get_custom(
        *MONITORING, instance.namespace, "servicemonitors", service_name(instance)
    )


def delete_ours(ctx: Context, instance: Instance, obs: Observation) -> None:
    """Delete the metrics Service and ServiceMonitor that are the instance's; absent ones
    are fine, and one that is not the instance's is left alone."""
    for child in obs.children:
        if ownership.classify(child, instance.uid) is ownership.Claim.OURS:
            ctx.kube.delete(child.kind, instance.namespace, child.name)


def observe(ctx: Context, instance: Instance) -> Observation:
    svc = _service(ctx, instance)
    api, monitor = _monitor(ctx, instance)
    port = ctx.config.exporter_port
    return Observation(
        enabled=instance.model.spec.monitoring.enabled,
        service_ok=svc is not None
        and manifests.covers(service(instance, port)["spec"], svc.get("spec")),
        service_exists=svc is not None,
        monitor_api=api,
        monitor_ok=monitor is not None
        and manifests.covers(service_monitor(instance)["spec"], monitor.get("spec")),
        monitor_exists=monitor is not None,
        children=(
            ownership.Child("Service", service_name(instance), ownership.meta_of(svc, ctx.kube)),
            ownership.Child(
                "ServiceMonitor", service_name(instance), ownership.meta_of(monitor, ctx.kube)
            ),
        ),
    )


class Monitoring(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        obs = observe(self.ctx, instance)
        refused = ownership.gate(self.ctx.kube, STEP, CONDITION, instance, list(obs.children))
        if refused is not None:
            return refused
        decision = decide(obs)
        if decision.reason == Reason.REMOVED:
            delete_ours(self.ctx, instance, obs)
        elif decision.reason == Reason.APPLIED:
            kube = self.ctx.kube
            svc = service(instance, self.ctx.config.exporter_port)
            kube.core.patch_namespaced_service(
                svc["metadata"]["name"],
                instance.namespace,
                svc,
                field_manager=names.FIELD_MANAGER,
                force=True,
                _content_type="application/apply-patch+yaml",
            )
            if obs.monitor_api:
                kube.apply_custom(*MONITORING, "servicemonitors", service_monitor(instance))
        return decision
