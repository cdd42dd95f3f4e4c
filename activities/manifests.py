"""The children of a DBInstance, as the orchestrator wants them (pure functions).

Sizes follow KubeVirt's hot-plug defaults: up to 4x the sockets and 4x the guest
memory can be added live; anything beyond needs a restart.
"""

from __future__ import annotations

from activities.kube import Instance, Manifest
from activities.secrets import cloudinit_name
from dbi import names

HOTPLUG_FACTOR = 4
IMAGE_ANNOTATION = "harvesterhci.io/imageId"


def data_claim_name(instance: Instance) -> str:
    return f"{instance.name}-data"


def vm(
    instance: Instance,
    *,
    run_strategy: str,
    max_sockets: int | None = None,
    max_guest_mebibytes: int | None = None,
) -> Manifest:
    """Return the VirtualMachine: CPU, memory, the data disk and the cloud-init Secret.

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
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": instance.child_metadata(instance.name, kept=True),
        "spec": {
            "runStrategy": run_strategy,
            "template": {
                "metadata": {"labels": {names.INSTANCE_LABEL: instance.name}},
                "spec": {
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
                        "devices": {
                            "disks": [
                                {"name": "data", "disk": {"bus": "virtio"}},
                                {"name": "cloudinit", "disk": {"bus": "virtio"}},
                            ]
                        },
                    },
                    "volumes": [
                        {
                            "name": "data",
                            "persistentVolumeClaim": {"claimName": data_claim_name(instance)},
                        },
                        {
                            "name": "cloudinit",
                            "cloudInitNoCloud": {"secretRef": {"name": cloudinit_name(instance)}},
                        },
                    ],
                },
            },
        },
    }


def data_claim(instance: Instance, *, image: str) -> Manifest:
    """Return the data disk's PVC, made from the image (Harvester's imageId annotation)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": instance.child_metadata(
            data_claim_name(instance), kept=True, annotations={IMAGE_ANNOTATION: image}
        ),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": instance.model.spec.resources.storage}},
        },
    }


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
