"""Where an instance's VM is: its VMI, and the address its PostgreSQL listens on.

KubeVirt writes a running VMI's interfaces into its status; the first one's
``ipAddress`` is where dbi connects (with the Service's name for TLS: ``trust``). The
steps and the backup and upgrade activities all read it here.
"""

from __future__ import annotations

from activities.infra.kube import KUBEVIRT, Instance, Kube, Manifest


def vmi_of(kube: Kube, instance: Instance) -> Manifest | None:
    """The instance's VirtualMachineInstance, or None when it has none (not running)."""
    return kube.get_custom(*KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name)


def address_of(vmi: Manifest | None) -> str | None:
    """The address a VMI's PostgreSQL listens on, or None before it has one."""
    interfaces = (vmi or {}).get("status", {}).get("interfaces", [])
    return interfaces[0].get("ipAddress") if interfaces else None
