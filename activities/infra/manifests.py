"""The children of a DBInstance, as the orchestrator wants them (pure functions).

Sizes follow KubeVirt's hot-plug defaults: up to 4x the sockets and 4x the guest
memory can be added live; anything beyond needs a restart.

Disks: a VM boots a root disk made from its image (``<name>-root-<hash of the
image>``, one per image, so a repave makes the next one beside the current one) and
keeps PostgreSQL's data on a blank data disk (``<name>-data``). Instances created
before root disks have one disk, ``<name>-data``, made from the image (its claim
carries the image annotation): they keep that layout (``one_disk``).
"""

from __future__ import annotations

import hashlib

from activities.infra.kube import Instance, Manifest
from activities.infra.secrets import cloudinit_name
from dbi import names

HOTPLUG_FACTOR = 4
IMAGE_ANNOTATION = "harvesterhci.io/imageId"
# Harvester writes the StorageClass a claim made from an image must use here.
IMAGE_STORAGE_CLASS = "storageClassName"
# Which of an instance's disks a claim is: ``root`` or ``data``.
DISK_LABEL, ROOT, DATA = names.DISK_LABEL, names.ROOT_DISK, names.DATA_DISK
# A root disk holds the OS and PostgreSQL's binaries: the image's size, rounded up.
ROOT_DISK_SIZE = "10Gi"


def data_claim_name(instance: Instance) -> str:
    return f"{instance.name}-data"


def root_claim_name(instance_name: str, image: str) -> str:
    """The root disk made from ``image`` (``namespace/name``): one name per image."""
    digest = hashlib.sha256(image.encode()).hexdigest()[:6]  # as long as -credentials
    return f"{instance_name}-root-{digest}"


def image_of(claim: Manifest | None) -> str | None:
    """The image a claim was made from (Harvester's imageId annotation), if any."""
    annotations = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(IMAGE_ANNOTATION) or None


def claim_of(template_spec: Manifest, volume: str) -> str | None:
    """The claim a VM's (or VMI's) spec mounts as ``volume``, if any."""
    for v in template_spec.get("volumes") or []:
        if v.get("name") == volume:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            return str(claim) if claim else None
    return None


def root_of(vm: Manifest | None) -> str | None:
    """The root claim a VM's template boots (None: none, or a one-disk VM)."""
    return claim_of(((vm or {}).get("spec") or {}).get("template", {}).get("spec") or {}, ROOT)


def vm(  # noqa: PLR0913 (a member VM: its name and role too)
    instance: Instance,
    *,
    run_strategy: str,
    root_claim: str | None,
    max_sockets: int | None = None,
    max_guest_mebibytes: int | None = None,
    member: str | None = None,
    replica: bool = False,
) -> Manifest:
    """Return the VirtualMachine: CPU, memory, the root disk ``root_claim`` (None: a
    one-disk VM, booting its data disk), the data disk and the cloud-init Secret.
    ``member``: another member's VM (``activities.infra.members``), with its own disks
    and cloud-init Secret, kept away from the other members' nodes where it can be;
    ``replica``: its pods are labelled as a replica's (the Service ``<name>-ro``).

    The hot-plug limits are boot-time settings: the VM's current ones (``max_*``) are
    kept while the spec fits in them, so a change within them stays live; a change
    beyond them raises them (4x the new size) and needs a restart anyway.
    """
    resources = instance.model.spec.resources
    mebibytes = resources.memory_mebibytes()
    if max_sockets is None or max_sockets < resources.cpu:
        max_sockets = min(resources.cpu * HOTPLUG_FACTOR, 128)
    if max_guest_mebibytes is None or max_guest_mebibytes < mebibytes:
        max_guest_mebibytes = mebibytes * HOTPLUG_FACTOR
    disks: list[Manifest] = []
    volumes: list[Manifest] = []
    if root_claim is not None:
        disks.append({"name": ROOT, "bootOrder": 1, "disk": {"bus": "virtio"}})
        volumes.append({"name": ROOT, "persistentVolumeClaim": {"claimName": root_claim}})
    disks += [
        {"name": DATA, "disk": {"bus": "virtio"}},
        {"name": "cloudinit", "disk": {"bus": "virtio"}},
    ]
    data = f"{member}-data" if member else data_claim_name(instance)
    volumes += [
        {"name": DATA, "persistentVolumeClaim": {"claimName": data}},
        {
            "name": "cloudinit",
            "cloudInitNoCloud": {
                "secretRef": {"name": f"{member}-cloudinit" if member else cloudinit_name(instance)}
            },
        },
    ]
    labels = {names.INSTANCE_LABEL: instance.name}
    metadata = instance.child_metadata(member or instance.name, kept=member is None)
    placement: Manifest = {}
    if replica:
        labels[names.MEMBER_ROLE_LABEL] = names.REPLICA
    if member:
        labels[names.MEMBER_LABEL] = member
        metadata["labels"][names.MEMBER_LABEL] = member
        placement = {"affinity": _apart(instance)}
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": metadata,
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    **placement,
                    "domain": {
                        "cpu": {
                            "sockets": resources.cpu,
                            "cores": 1,
                            "threads": 1,
                            "maxSockets": max_sockets,
                        },
                        "memory": {
                            "guest": f"{mebibytes}Mi",
                            "maxGuest": f"{max_guest_mebibytes}Mi",
                        },
                        "devices": {"disks": disks},
                    },
                    "volumes": volumes,
                },
            },
        },
    }


def _apart(instance: Instance) -> Manifest:
    """A replica's preference for a node that runs no other member of its instance."""
    term = {
        "labelSelector": {"matchLabels": {names.INSTANCE_LABEL: instance.name}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "podAffinityTerm": term}
            ]
        }
    }


def data_claim(
    instance: Instance, *, image: str | None = None, data_major: str | None = None
) -> Manifest:
    """Return the data disk's PVC: blank, or, for a one-disk instance, made from
    ``image`` (Harvester's imageId annotation, kept as it was); ``data_major``: the
    PostgreSQL major of its data (``dbi.dev/data-major``, kept as it was: only an
    upgrade moves it)."""
    annotations = {IMAGE_ANNOTATION: image} if image else {}
    if data_major:
        annotations[names.DATA_MAJOR_ANNOTATION] = data_major
    metadata = instance.child_metadata(
        data_claim_name(instance), kept=True, annotations=annotations
    )
    if not image:
        metadata["labels"][DISK_LABEL] = DATA
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": metadata,
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": instance.model.spec.resources.storage}},
        },
    }


def root_claim(instance: Instance, image: str, *, storage_class: str | None = None) -> Manifest:
    """Return a root disk's PVC, made from ``image`` (with the StorageClass Harvester
    gives the image, when it says one)."""
    metadata = instance.child_metadata(
        root_claim_name(instance.name, image), kept=True, annotations={IMAGE_ANNOTATION: image}
    )
    metadata["labels"][DISK_LABEL] = ROOT
    spec: Manifest = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": ROOT_DISK_SIZE}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata, "spec": spec}


def covers(desired: object, observed: object) -> bool:
    """Tell whether ``observed`` has every field of ``desired`` with the same value.

    Fields only in ``observed`` (set by KubeVirt or another manager) do not count.
    """
    if isinstance(desired, dict):
        return isinstance(observed, dict) and all(
            covers(v, observed.get(k)) for k, v in desired.items()
        )
    if isinstance(desired, list):
        return (
            isinstance(observed, list)
            and len(desired) == len(observed)
            and all(covers(d, o) for d, o in zip(desired, observed, strict=True))
        )
    return desired == observed
