"""Where an instance's primary is: its VMI, and the address its PostgreSQL listens on.

KubeVirt writes a running VMI's interfaces into its status; the first one's
``ipAddress`` is where dbi connects (with the Service's name for TLS: ``trust``). The
steps and the backup and upgrade activities all read it here.
"""

from __future__ import annotations

from activities.infra.kube import KUBEVIRT, Instance, Kube, Manifest


def primary_of(instance: Instance) -> str:
    """The member (VM) that takes writes: with spec.instances, ``status.primary`` (the
    replicas step publishes it once a switchover is complete), else the instance's VM."""
    status = instance.model.status
    if instance.model.spec.instances is not None and status.primary:
        return status.primary
    return instance.name


def vmi_of(kube: Kube, instance: Instance, member: str | None = None) -> Manifest | None:
    """The VirtualMachineInstance of the instance's primary (or of ``member``), or None
    when it has none (not running)."""
    name = member or primary_of(instance)
    return kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachineinstances", name)


def address_of(vmi: Manifest | None) -> str | None:
    """The address a VMI's PostgreSQL listens on, or None before it has one."""
    interfaces = (vmi or {}).get("status", {}).get("interfaces", [])
    return interfaces[0].get("ipAddress") if interfaces else None
