"""An instance's metrics objects: the Service ``<name>-metrics`` for the exporter and a
ServiceMonitor for it, as the monitoring step applies them and the teardown removes
them."""

from __future__ import annotations

from dataclasses import dataclass

from kubernetes import client as k8s

from activities.infra import ownership
from activities.infra.context import Context
from activities.infra.kube import Instance, Manifest
from dbi import names

MONITORING = ("monitoring.coreos.com", "v1")


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


@dataclass(frozen=True, kw_only=True)
class Found:
    """The metrics objects that exist, and whether the cluster serves ServiceMonitors."""

    service: Manifest | None
    monitor_api: bool
    monitor: Manifest | None
    children: tuple[ownership.Child, ...]


def read(ctx: Context, instance: Instance) -> Found:
    svc = ctx.kube.service(instance.namespace, service_name(instance))
    groups = k8s.ApisApi(ctx.kube.api).get_api_versions().groups or []
    api = any(g.name == MONITORING[0] for g in groups)
    monitor = None
    if api:
        monitor = ctx.kube.get_custom(
            *MONITORING, instance.namespace, "servicemonitors", service_name(instance)
        )
    return Found(
        service=svc,
        monitor_api=api,
        monitor=monitor,
        children=(
            ownership.Child("Service", service_name(instance), ownership.meta_of(svc, ctx.kube)),
            ownership.Child(
                "ServiceMonitor", service_name(instance), ownership.meta_of(monitor, ctx.kube)
            ),
        ),
    )
