"""preflight (SpecValid): what the schema cannot check, and the finalizer.

Observes the instance, the VirtualMachineImage it would boot and the data disk's
capacity. Terminal when retrying cannot help (a version with no image, an image that
does not exist, storage below what the disk already has); otherwise adds the
finalizer (Pending), then is Satisfied. Idempotent: the finalizer patch names the
full list it expects.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from kubernetes import client as k8s
from temporalio import activity

from activities.context import AT_ONCE, Context, Step, result
from activities.kube import Instance
from dbi import names
from dbi.quantity import parse_quantity
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "preflight", "SpecValid"


class Reason(StrEnum):
    VALID = "SpecValid"
    FINALIZER_ADDED = "FinalizerAdded"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    IMAGE_NOT_FOUND = "ImageNotFound"
    STORAGE_BELOW_CAPACITY = "StorageBelowCapacity"
    CONFLICT = "Conflict"


@dataclass(frozen=True)
class Observation:
    version: int
    image: str | None  # the image to boot, None when the version has none configured
    image_exists: bool
    storage: Decimal
    disk_capacity: Decimal | None
    has_finalizer: bool


def image_for(instance: Instance, images: dict[int, str]) -> str | None:
    """Return the VirtualMachineImage ``namespace/name`` the instance boots."""
    spec = instance.model.spec
    return spec.image or images.get(spec.version)


def observe(ctx: Context, instance: Instance) -> Observation:
    image = image_for(instance, ctx.config.images)
    exists = False
    if image is not None:
        namespace, name = image.split("/", 1)
        exists = (
            ctx.kube.get_custom(
                "harvesterhci.io", "v1beta1", namespace, "virtualmachineimages", name
            )
            is not None
        )
    disk = ctx.kube.pvc(instance.namespace, f"{instance.name}-data")
    capacity = (disk.status.capacity or {}).get("storage") if disk and disk.status else None
    return Observation(
        version=instance.model.spec.version,
        image=image,
        image_exists=exists,
        storage=parse_quantity(instance.model.spec.resources.storage),
        disk_capacity=parse_quantity(capacity) if capacity else None,
        has_finalizer=names.FINALIZER in instance.finalizers,
    )


def decide(obs: Observation) -> StepResult:
    """Return the outcome for an observation (pure)."""

    def terminal(reason: Reason, message: str) -> StepResult:
        return result(STEP, CONDITION, Outcome.TERMINAL, reason, message)

    if obs.image is None:
        return terminal(
            Reason.UNSUPPORTED_VERSION,
            f"spec.version {obs.version} has no image configured; set spec.image or use "
            "a supported version.",
        )
    if not obs.image_exists:
        return terminal(
            Reason.IMAGE_NOT_FOUND,
            f"spec.image: the VirtualMachineImage {obs.image} does not exist.",
        )
    if obs.disk_capacity is not None and obs.storage < obs.disk_capacity:
        return terminal(
            Reason.STORAGE_BELOW_CAPACITY,
            "spec.resources.storage is below the data disk's capacity; disks never shrink.",
        )
    if not obs.has_finalizer:
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.FINALIZER_ADDED,
            "The teardown finalizer was added.",
            requeue_after=AT_ONCE,
        )
    return result(STEP, CONDITION, Outcome.SATISFIED, Reason.VALID, "The spec is valid.")


def add_finalizer(ctx: Context, instance: Instance) -> None:
    # A JSON merge patch replaces the list; the resourceVersion makes it fail rather
    # than drop a finalizer someone else added meanwhile.
    ctx.kube.objects.patch_namespaced_custom_object(
        names.GROUP,
        names.VERSION,
        instance.namespace,
        names.PLURAL,
        instance.name,
        {
            "metadata": {
                "finalizers": [*instance.finalizers, names.FINALIZER],
                "resourceVersion": instance.model.metadata["resourceVersion"],
            }
        },
    )


class Preflight(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        decision = decide(observe(self.ctx, instance))
        if decision.reason == Reason.FINALIZER_ADDED:
            try:
                add_finalizer(self.ctx, instance)
            except k8s.ApiException as e:
                if e.status != 409:
                    raise
                # The instance changed since it was read; the next pass reads it again.
                return result(
                    STEP,
                    CONDITION,
                    Outcome.PENDING,
                    Reason.CONFLICT,
                    "The instance changed while the finalizer was added.",
                    requeue_after=AT_ONCE,
                )
        return decision
