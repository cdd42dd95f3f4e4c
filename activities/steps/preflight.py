"""preflight (SpecValid): what the schema cannot check, and the finalizer.

Observes the instance, the VirtualMachineImage it would boot and the data disk's
capacity. Terminal when retrying cannot help (a version with no image, an image in a
namespace whose images instances may not boot (another tenant's: never read), an image
that does not exist, an image labelled ``dbi.dev/postgresql-version`` with another major
than ``spec.version``, storage below what the disk already has, parameters whose shared
memory would not stay below 3/4 of the VM's memory); otherwise adds the
finalizer (Pending), then is Satisfied. Idempotency key: the finalizer list; the patch
names the list it read and its resourceVersion, so a concurrent change makes it fail
(409) and the loop looks again, never dropping another's finalizer.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.infra.machine import image_for
from activities.steps.loop import Anatomy
from dbi import names, parameters
from dbi.parameters import PostgreSQL
from dbi.pipeline import PREFLIGHT as SPEC
from dbi.quantity import parse_quantity
from dbi.steps import AT_ONCE, Decision, StepInput


class Reason(StrEnum):
    VALID = SPEC.condition_type
    FINALIZER_ADDED = "FinalizerAdded"
    UNSUPPORTED_VERSION = "UnsupportedVersion"
    IMAGE_NOT_FOUND = "ImageNotFound"
    IMAGE_NOT_ALLOWED = "ImageNotAllowed"
    IMAGE_VERSION_MISMATCH = "ImageVersionMismatch"
    STORAGE_BELOW_CAPACITY = "StorageBelowCapacity"
    UNSTARTABLE = "ParametersTooLarge"


class Action(StrEnum):
    ADD_FINALIZER = "add-finalizer"


@dataclass(frozen=True, kw_only=True)
class Observation:
    version: int
    image: str | None  # the image to boot, None when the version has none configured
    # In a namespace whose images instances may boot (the operator's); None: it is not,
    # and it was not looked at.
    image_namespaces: frozenset[str] | None = None
    image_exists: bool
    image_version: str | None = None  # what the image's dbi.dev/postgresql-version says
    storage: Decimal
    # The size dbi last asked of the data disk (the claim's request). Its capacity may be
    # larger: a provisioner may round up, and the spec is not below what it asked.
    disk_request: Decimal | None
    has_finalizer: bool
    # Why spec.postgresql.parameters would not fit the VM's memory (dbi.parameters).
    unstartable: str | None = None


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    image = image_for(instance, ctx.config.images)
    allowed = ctx.config.image_namespaces
    found = None
    if image is not None and image.split("/", 1)[0] in allowed:
        namespace, name = image.split("/", 1)
        found = ctx.kube.get_custom(
            "harvesterhci.io", "v1beta1", namespace, "virtualmachineimages", name
        )
    labels = ((found or {}).get("metadata") or {}).get("labels") or {}
    disk = ctx.kube.pvc(instance.namespace, f"{instance.name}-data")
    requests = disk.spec.resources.requests if disk and disk.spec and disk.spec.resources else None
    request = (requests or {}).get("storage")
    spec = instance.model.spec
    memory = spec.resources.memory
    return Observation(
        version=instance.model.spec.version,
        image=image,
        image_namespaces=allowed,
        image_exists=found is not None,
        image_version=labels.get(names.IMAGE_VERSION_LABEL),
        storage=parse_quantity(instance.model.spec.resources.storage),
        disk_request=parse_quantity(request) if request else None,
        has_finalizer=names.FINALIZER in instance.finalizers,
        unstartable=parameters.unstartable(
            PostgreSQL.declared(spec.postgresql), memory, spec.resources.memory_bytes()
        ),
    )


def _invalid(obs: Observation) -> tuple[Reason, str] | None:
    """Why retrying the spec cannot help, if so (pure)."""
    if (image := _image_invalid(obs)) is not None:
        return image
    if obs.disk_request is not None and obs.storage < obs.disk_request:
        return (
            Reason.STORAGE_BELOW_CAPACITY,
            "spec.resources.storage is below the data disk's capacity; disks never shrink.",
        )
    if obs.unstartable is not None:
        return (Reason.UNSTARTABLE, obs.unstartable)
    return None


def _image_invalid(obs: Observation) -> tuple[Reason, str] | None:
    """Why the image cannot boot this instance, if so (pure)."""
    if obs.image is None:
        return (
            Reason.UNSUPPORTED_VERSION,
            f"spec.version {obs.version} has no image configured; set spec.image or use "
            "a supported version.",
        )
    if obs.image_namespaces is not None and obs.image.split("/", 1)[0] not in obs.image_namespaces:
        return (
            Reason.IMAGE_NOT_ALLOWED,
            f"spec.image: {obs.image} is not in a namespace whose images instances may "
            f"boot ({', '.join(sorted(obs.image_namespaces))}; DBI_IMAGE_NAMESPACES adds "
            "more).",
        )
    if not obs.image_exists:
        return (
            Reason.IMAGE_NOT_FOUND,
            f"spec.image: the VirtualMachineImage {obs.image} does not exist.",
        )
    if obs.image_version and obs.image_version.split(".")[0] != str(obs.version):
        return (
            Reason.IMAGE_VERSION_MISMATCH,
            f"spec.image: the VirtualMachineImage {obs.image} holds PostgreSQL "
            f"{obs.image_version}, but spec.version is {obs.version}; an image of another "
            "major would not run this instance's data.",
        )
    return None


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome for an observation, and whether to add the finalizer (pure)."""
    invalid = _invalid(obs)
    if invalid is not None:
        return SPEC.terminal(*invalid)
    if not obs.has_finalizer:
        message = "The teardown finalizer was added."
        return SPEC.pending(Reason.FINALIZER_ADDED, message, Action.ADD_FINALIZER, after=AT_ONCE)
    return SPEC.satisfied(Reason.VALID, "The spec is valid.")


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    ctx.kube.set_finalizers(instance, [*instance.finalizers, names.FINALIZER])


STEP = Anatomy(SPEC, observe, decide, act)
