"""monitoring (MonitoringReady): a Service for the exporter and a ServiceMonitor.

When enabled: the Service ``<name>-metrics`` (selecting the VM's pods by the instance
label) and a ServiceMonitor for it, applied when missing or different (Pending), then
Satisfied. Either name held by an object that is not the instance's stops the step
(``activities.infra.ownership``). A cluster without the ServiceMonitor API gets the Service
only, and says so in the reason (no failure loop). When disabled: both are deleted
(Pending), then Satisfied. Idempotency key: the names; applies are server-side
applies of the same objects, and deleting one already gone is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import manifests, ownership, scrape
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import Anatomy
from dbi.pipeline import MONITORING as SPEC
from dbi.pipeline import TEARDOWN_MONITORING
from dbi.steps import AT_ONCE, Decision, StepInput


class Reason(StrEnum):
    READY = SPEC.condition_type
    NO_SERVICE_MONITOR_API = "ServiceMonitorUnavailable"
    APPLIED = "MonitoringApplied"
    DISABLED = "Disabled"
    REMOVED = TEARDOWN_MONITORING.condition_type  # what is disabled goes as at a teardown


class Action(StrEnum):
    APPLY = "apply"
    REMOVE = "remove"


@dataclass(frozen=True, kw_only=True)
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

    if not obs.enabled:
        if obs.service_exists or obs.monitor_exists:
            message = "Monitoring is disabled; its objects were deleted."
            return SPEC.pending(Reason.REMOVED, message, Action.REMOVE, after=AT_ONCE)
        return SPEC.satisfied(Reason.DISABLED, "Monitoring is disabled.")
    if not obs.service_ok or (obs.monitor_api and not obs.monitor_ok):
        message = "The metrics Service and ServiceMonitor were applied."
        return SPEC.pending(Reason.APPLIED, message, Action.APPLY, after=AT_ONCE)
    if not obs.monitor_api:
        return SPEC.satisfied(
            Reason.NO_SERVICE_MONITOR_API,
            "The metrics Service exists; the cluster has no ServiceMonitor API, so "
            "Prometheus Operator will not scrape it.",
        )
    return SPEC.satisfied(Reason.READY, "The metrics Service and ServiceMonitor exist.")


def delete_ours(ctx: Context, instance: Instance, obs: Observation) -> None:
    """Delete the metrics Service and ServiceMonitor that are the instance's; absent ones
    are fine, and one that is not the instance's is left alone."""
    for child in obs.children:
        if ownership.classify(child, instance.uid) is ownership.Claim.OURS:
            ctx.kube.delete(child.kind, instance.namespace, child.name)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    found = scrape.read(ctx, instance)
    svc, monitor = found.service, found.monitor
    port = ctx.config.exporter_port
    return Observation(
        enabled=instance.model.spec.monitoring.enabled,
        service_ok=svc is not None
        and manifests.covers(scrape.service(instance, port)["spec"], svc.get("spec")),
        service_exists=svc is not None,
        monitor_api=found.monitor_api,
        monitor_ok=monitor is not None
        and manifests.covers(scrape.service_monitor(instance)["spec"], monitor.get("spec")),
        monitor_exists=monitor is not None,
        children=found.children,
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    if action is Action.REMOVE:
        delete_ours(ctx, instance, obs)
        return
    kube = ctx.kube
    svc = scrape.service(instance, ctx.config.exporter_port)
    kube.apply_service(svc)
    if obs.monitor_api:
        kube.apply_custom(*scrape.MONITORING, "servicemonitors", scrape.service_monitor(instance))


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
