"""An instance's VM as the steps that change it share it: the image it boots, its root
disks, the VM manifest to apply and its run strategy (the vm, power, repave and
upgrade steps, and preflight's image check)."""

from __future__ import annotations

from activities.infra import addresses, manifests
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from dbi.quantity import parse_quantity
from dbi.spec import PowerState


def image_for(instance: Instance, images: dict[int, str]) -> str | None:
    """Return the VirtualMachineImage ``namespace/name`` the instance boots."""
    spec = instance.model.spec
    return spec.image or images.get(spec.version)


def desired_strategy(instance: Instance) -> str:
    """The runStrategy spec.powerState asks for."""
    return "Halted" if instance.model.spec.power_state is PowerState.STOPPED else "Always"


def desired_vm(
    instance: Instance, observed: Manifest | None, *, root_claim: str | None
) -> Manifest:
    """Return the VM to apply: our fields and the root disk ``root_claim``, with
    runStrategy and hot-plug limits as observed."""
    spec = (observed or {}).get("spec", {})
    domain = spec.get("template", {}).get("spec", {}).get("domain", {})
    max_guest = domain.get("memory", {}).get("maxGuest")
    return manifests.vm(
        instance,
        run_strategy=spec.get("runStrategy") or desired_strategy(instance),
        root_claim=root_claim,
        max_sockets=domain.get("cpu", {}).get("maxSockets"),
        max_guest_mebibytes=int(parse_quantity(max_guest) // 2**20) if max_guest else None,
        replica=addresses.primary_of(instance) != instance.name,
    )


def image_storage_class(ctx: Context, image: str) -> str | None:
    """The StorageClass Harvester gives an image's disks (its status says), if any."""
    namespace, name = image.split("/", 1)
    found = ctx.kube.get_custom(
        "harvesterhci.io", "v1beta1", namespace, "virtualmachineimages", name
    )
    return ((found or {}).get("status") or {}).get(manifests.IMAGE_STORAGE_CLASS) or None


def create_root(ctx: Context, instance: Instance, image: str) -> None:
    """Create the root disk made from ``image`` (idempotent: its name is the image's)."""
    claim = manifests.root_claim(instance, image, storage_class=image_storage_class(ctx, image))
    ctx.kube.apply_pvc(claim)


def boot_root(ctx: Context, instance: Instance, root: str) -> None:
    """Point the VM's ``root`` volume at the claim ``root`` (its next boot boots it)."""
    kube = ctx.kube
    observed = kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachines", instance.name)
    if manifests.root_of(observed) != root:
        desired = desired_vm(instance, observed, root_claim=root)
        kube.apply_custom(*KUBEVIRT, "virtualmachines", desired)
