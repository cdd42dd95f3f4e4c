"""The first step of every kind declared on an instance (database_instance,
role_instance; condition InstanceReady), and what the other steps share.

It refuses a spec its instance cannot serve, naming the field (``FieldRefused``; each
kind says why in its ``refusal``), adds the finalizer ``dbi.dev/teardown``, and waits
while the instance is not Ready (``InstanceNotReady``). A missing instance is Terminal
(``InstanceNotFound``: the object is Stalled) until one is created: its creation wakes
the object (``watcher.objects``). The instance is always looked up in the object's own
namespace: no field names another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.objects.loop import Anatomy
from activities.objects.object import Declared, set_finalizers
from dbi import names
from dbi.databases import OnInstanceSpec
from dbi.models import ConditionStatus
from dbi.pipeline import DATABASE_INSTANCE, StepSpec
from dbi.steps import AT_ONCE, Decision

INSTANCE_WAIT_SECONDS = 30.0
# What a spec its instance cannot serve is refused for: (field, why), or None.
Refusal = Callable[[Context, Declared, Instance | None], tuple[str, str] | None]


class Reason(StrEnum):
    INSTANCE_READY = DATABASE_INSTANCE.condition_type  # ROLE_INSTANCE's too
    SPEC_UNREADABLE = "SpecUnreadable"
    FIELD_REFUSED = "FieldRefused"
    FINALIZER_ADDED = "FinalizerAdded"
    INSTANCE_NOT_FOUND = "InstanceNotFound"
    INSTANCE_DELETING = "InstanceDeleting"
    INSTANCE_NOT_READY = "InstanceNotReady"
    NO_ADDRESS = "NoAddress"


def instance_of(ctx: Context, declared: Declared) -> Instance | None:
    """The object's instance, in its namespace; None when there is none."""
    spec = declared.spec_as(OnInstanceSpec)
    return ctx.kube.instance(declared.namespace, spec.instance)


def no_address(spec: StepSpec) -> Decision[Any]:
    return spec.pending(Reason.NO_ADDRESS, "The instance's VM has no address yet.", after=10.0)


def _ready(instance: Instance) -> bool:
    return any(
        c.type == "Ready" and c.status is ConditionStatus.TRUE
        for c in instance.model.status.conditions
    )


@dataclass(frozen=True)
class OnInstance:
    unreadable: str | None
    refused: tuple[str, str] | None
    finalized: bool
    instance: str
    exists: bool = False
    deleting: bool = False
    ready: bool = False


def decide(spec: StepSpec, o: OnInstance) -> Decision[str]:
    if o.unreadable is not None:
        return spec.terminal(Reason.SPEC_UNREADABLE, f"This worker cannot read {o.unreadable}.")
    if o.refused is not None:
        field, why = o.refused
        return spec.terminal(Reason.FIELD_REFUSED, f"{field}: {why}.")
    if not o.finalized:
        message = f"Added {names.FINALIZER}."
        return spec.pending(Reason.FINALIZER_ADDED, message, "finalize", after=AT_ONCE)
    return _on_instance(spec, o)


def _on_instance(spec: StepSpec, o: OnInstance) -> Decision[str]:
    if not o.exists:
        message = f"spec.instance: no DBInstance {o.instance} in this namespace (its creation "
        return spec.terminal(Reason.INSTANCE_NOT_FOUND, message + "wakes this object).")
    if o.deleting:
        return spec.terminal(Reason.INSTANCE_DELETING, f"DBInstance {o.instance} is being deleted.")
    if not o.ready:
        message = f"Waiting for DBInstance {o.instance} to be Ready."
        return spec.pending(Reason.INSTANCE_NOT_READY, message, after=INSTANCE_WAIT_SECONDS)
    return spec.satisfied(Reason.INSTANCE_READY, f"DBInstance {o.instance} is Ready.")


def step(spec: StepSpec, refusal: Refusal) -> Anatomy[OnInstance, str]:
    """The instance step of a kind whose specs ``refusal`` checks."""

    def observe(ctx: Context, declared: Declared) -> OnInstance:
        if declared.spec is None:
            return OnInstance(declared.unreadable, None, False, "")
        instance = instance_of(ctx, declared)
        return OnInstance(
            unreadable=None,
            refused=refusal(ctx, declared, instance),
            finalized=names.FINALIZER in declared.finalizers,
            instance=declared.spec_as(OnInstanceSpec).instance,
            exists=instance is not None,
            deleting=instance is not None and instance.deleting,
            ready=instance is not None and _ready(instance),
        )

    def finalize(ctx: Context, declared: Declared, _o: OnInstance, _action: str) -> None:
        set_finalizers(ctx.kube, declared, [*declared.finalizers, names.FINALIZER])

    return Anatomy(spec, observe, lambda o: decide(spec, o), finalize)


def finalizer_off(ctx: Context, declared: Declared) -> None:
    kept = [f for f in declared.finalizers if f != names.FINALIZER]
    set_finalizers(ctx.kube, declared, kept)
