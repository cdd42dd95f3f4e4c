"""Kubernetes Events about a DBInstance or a DBDatabase: for condition transitions
(write_status) and for each action a step takes, as controllers record what they did."""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Protocol

from kubernetes import client as k8s
from temporalio import activity

from activities.infra.kube import Kube
from dbi import names
from dbi.status import Event


class Involved(Protocol):
    """The object an Event is about."""

    @property
    def name(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...


def emit(
    kube: Kube, instance: Involved, event: Event, now: datetime, kind: str = names.KIND
) -> None:
    """Create a core/v1 Event about the object (a DBInstance unless ``kind`` says), best
    effort: a refusal (a namespace being deleted, say) is logged, not raised; what the
    Event reports stands anyway."""
    body = k8s.CoreV1Event(
        metadata=k8s.V1ObjectMeta(
            name=f"{instance.name}.{secrets.token_hex(8)}", namespace=instance.namespace
        ),
        involved_object=k8s.V1ObjectReference(
            api_version=names.API_VERSION,
            kind=kind,
            name=instance.name,
            namespace=instance.namespace,
            uid=instance.uid,
        ),
        reason=event.reason,
        message=event.message,
        type=event.type,
        source=k8s.V1EventSource(component=names.FIELD_MANAGER),
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        reporting_component=names.FIELD_MANAGER,
        reporting_instance=(activity.info().workflow_id if activity.in_activity() else None) or "",
    )
    try:
        kube.core.create_namespaced_event(instance.namespace, body)
    except k8s.ApiException as e:
        activity.logger.warning("Event %s not recorded: %s", event.reason, e.reason)
