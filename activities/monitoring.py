"""monitoring (MonitoringReady): a Service for the exporter and a ServiceMonitor.

When enabled: the Service ``<name>-metrics`` (selecting the VM's pods by the instance
label) and a ServiceMonitor for it, applied when missing or different (Pending), then
Satisfied. Either name held by an object that is not the instance's stops the step
(``activities.ownership``). A cluster without the ServiceMonitor API gets the Service
only, and says so in the reason (no failure loop). When disabled: both are deleted
(Pending), then Satisfied. Idempotency key: the names; applies are server-side
applies of the same objects, and deleting one already gone is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client as k8s

from activities import manifests, ownership
from activities.kube import Instance, Manifest
from activities.step import Anatomy, Context
from dbi import names
from dbi.pipeline import MONITORING as SPEC
from dbi.pipeline import TEARDOWN_MONITORING
from dbi.steps import AT_ONCE, Decision, Outcome, StepInput

MONITORING = ("monitoring.coreos.com", "v1")


class Reason(StrEnum):
    READY = SPEC.condition_type
    NO_SERVICE_MONITOR_API = "ServiceMonitorUnavailable"
    APPLIED = "MonitoringApplied"
    DISABLED = "Disabled"
    REMOVED = TEARDOWN_MONITORING.condition_type  # what is disabled goes as at a teardown


class Action(StrEnum):
    APPLY = "apply"
    REMOVE = "remove"


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


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and whether to apply or remove the objects (pure)."""

    def pending(reason: Reason, message: str, action: Action) -> Decision[Action]:
        result = SPEC.result(Outcome.PENDING, reason, message, requeue_after_seconds=AT_ONCE)
        return Decision(result, action)

    def satisfied(reason: Reason, message: str) -> Decision[Action]:
        return Decision(SPEC.result(Outcome.SATISFIED, reason, message))

    if not obs.enabled:
        if obs.service_exists or obs.monitor_exists:
            message = "Monitoring is disabled; its objects were deleted."
            return pending(Reason.REMOVED, message, Action.REMOVE)
        return satisfied(Reason.DISABLED, "Monitoring is disabled.")
    if not obs.service_ok or (obs.monitor_api and not obs.monitor_ok):
        message = "The metrics Service and ServiceMonitor were applied."
        return pending(Reason.APPLIED, message, Action.APPLY)
    if not obs.monitor_api:
        return satisfied(
            Reason.NO_SERVICE_MONITOR_API,
            "The metrics Service exists; the cluster has no ServiceMonitor API, so "
            "Prometheus Operator will not scrape it.",
        )
    return satisfied(Reason.READY, "The metrics Service and ServiceMonitor exist.")


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


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    svc = ctx.kube.service(instance.namespace, service_name(instance))
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


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    if action is Action.REMOVE:
        delete_ours(ctx, instance, obs)
        return
    kube = ctx.kube
    svc = service(instance, ctx.config.exporter_port)
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


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
