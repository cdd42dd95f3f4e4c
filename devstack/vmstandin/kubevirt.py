"""What KubeVirt would do with a VirtualMachine, as pure functions of its manifest.

Dev and test infrastructure: the stand-in uses these to decide whether a VM should
run, what its VMI looks like, which size changes apply live (CPU sockets within
``maxSockets``, guest memory within ``maxGuest``) and which need a restart, and what
status KubeVirt would write.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbi.quantity import parse_quantity

RUNNING_STRATEGIES = {"Always", "RerunOnFailure"}
CRASH_ANNOTATION = "devstack.dbi.dev/crash"
FAIL_BOOT_ANNOTATION = "devstack.dbi.dev/fail-boot"
# On a dev VirtualMachineImage: "qemu" makes its VMs real VMs, booted on qemu from dbi's
# image of the build its dbi.dev/postgresql-version label names (built when missing).
QEMU_LABEL = "devstack.dbi.dev/boots"

Manifest = dict[str, Any]


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wants_to_run(vm: Manifest) -> bool:
    """Tell whether the VM's runStrategy (or legacy ``running``) asks for it to run."""
    spec = vm.get("spec", {})
    strategy = spec.get("runStrategy")
    if strategy is None:
        return bool(spec.get("running", False))
    return strategy in RUNNING_STRATEGIES


def template_spec(vm: Manifest) -> Manifest:
    return dict(vm.get("spec", {}).get("template", {}).get("spec", {}))


def cloud_init_secret(spec: Manifest) -> str | None:
    """Return the name of the Secret holding cloud-init user-data, if the spec has one."""
    for volume in spec.get("volumes", []):
        ref = volume.get("cloudInitNoCloud", {}).get("secretRef", {}).get("name")
        if ref:
            return str(ref)
    return None


def data_claim(spec: Manifest) -> str | None:
    """Return the PVC that plays the VM's data disk (its ``data`` volume's, else its
    first claim's), if the spec mounts one."""
    for volume in spec.get("volumes", []):
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim and volume.get("name") == "data":
            return str(claim)
    for volume in spec.get("volumes", []):
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim:
            return str(claim)
    return None


def root_claim(spec: Manifest) -> str | None:
    """Return the PVC the VM boots from (its ``root`` volume's), if it has one; a
    one-disk VM boots its data disk."""
    for volume in spec.get("volumes", []):
        claim = volume.get("persistentVolumeClaim", {}).get("claimName")
        if claim and volume.get("name") == "root":
            return str(claim)
    return None


@dataclass(frozen=True)
class Size:
    """CPU and memory of a domain spec, with the bounds of live changes."""

    sockets: int
    cores: int
    threads: int
    max_sockets: int
    memory_bytes: int
    max_memory_bytes: int

    @property
    def cpus(self) -> int:
        return self.sockets * self.cores * self.threads


def size_of(spec: Manifest) -> Size:
    domain = spec.get("domain", {})
    cpu = domain.get("cpu", {})
    memory = domain.get("memory", {})
    requested = domain.get("resources", {}).get("requests", {}).get("memory", "512Mi")
    guest = int(parse_quantity(str(memory.get("guest", requested))))
    sockets = int(cpu.get("sockets", 1))
    return Size(
        sockets=sockets,
        cores=int(cpu.get("cores", 1)),
        threads=int(cpu.get("threads", 1)),
        max_sockets=int(cpu.get("maxSockets", sockets)),
        memory_bytes=guest,
        max_memory_bytes=int(parse_quantity(str(memory.get("maxGuest", guest)))),
    )


def _without_live_fields(spec: Manifest) -> Manifest:
    stripped = copy.deepcopy(spec)
    domain = stripped.get("domain", {})
    domain.get("cpu", {}).pop("sockets", None)
    domain.get("memory", {}).pop("guest", None)
    domain.pop("resources", None)
    return stripped


@dataclass(frozen=True)
class Change:
    """How the running VMI must follow the VM's template."""

    live: bool
    restart_required: bool


def compare(template: Manifest, running: Manifest) -> Change:
    """Compare the VM's template with the spec the VMI booted with (and live changes).

    Sockets within the booted ``maxSockets`` and guest memory within the booted
    ``maxGuest`` apply live; any other difference needs a restart.
    """
    if _without_live_fields(template) != _without_live_fields(running):
        return Change(live=False, restart_required=True)
    want, have = size_of(template), size_of(running)
    if (want.sockets, want.memory_bytes) == (have.sockets, have.memory_bytes):
        return Change(live=False, restart_required=False)
    fits = want.sockets <= have.max_sockets and want.memory_bytes <= have.max_memory_bytes
    return Change(live=fits, restart_required=not fits)


def apply_live(template: Manifest, running: Manifest) -> Manifest:
    """Return the VMI spec after hot-plugging the template's sockets and guest memory."""
    spec = copy.deepcopy(running)
    domain = spec.setdefault("domain", {})
    want = template.get("domain", {})
    if "sockets" in want.get("cpu", {}):
        domain.setdefault("cpu", {})["sockets"] = want["cpu"]["sockets"]
    if "guest" in want.get("memory", {}):
        domain.setdefault("memory", {})["guest"] = want["memory"]["guest"]
    if "resources" in want:
        domain["resources"] = copy.deepcopy(want["resources"])
    return spec


def vmi_manifest(vm: Manifest) -> Manifest:
    """Return the VirtualMachineInstance KubeVirt creates for ``vm`` (owned by it)."""
    meta = vm["metadata"]
    template_meta = vm.get("spec", {}).get("template", {}).get("metadata", {})
    return {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": dict(template_meta.get("labels", {})),
            "annotations": dict(template_meta.get("annotations", {})),
            "ownerReferences": [
                {
                    "apiVersion": "kubevirt.io/v1",
                    "kind": "VirtualMachine",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": template_spec(vm),
        "status": {"phase": "Scheduling", "conditions": []},
    }


def vmi_status(phase: str, *, address: str | None, size: Size, ready: bool) -> Manifest:
    """Return a VMI status as KubeVirt writes it (phase, interfaces, topology, conditions)."""
    conditions = [
        {"type": "Ready", "status": str(ready), "lastTransitionTime": now()},
        {"type": "AgentConnected", "status": str(ready), "lastTransitionTime": now()},
    ]
    status: Manifest = {
        "phase": phase,
        "conditions": conditions,
        "currentCPUTopology": {
            "sockets": size.sockets,
            "cores": size.cores,
            "threads": size.threads,
        },
        "memory": {
            "guestCurrent": str(size.memory_bytes),
            "guestRequested": str(size.memory_bytes),
        },
    }
    if address is not None:
        status["interfaces"] = [{"name": "default", "ipAddress": address, "ipAddresses": [address]}]
    return status


def vmi_unschedulable(message: str) -> Manifest:
    """Return the status of a VMI no node can hold: Scheduling, with the PodScheduled
    condition its virt-launcher pod's scheduler wrote."""
    return {
        "phase": "Scheduling",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": now(),
            }
        ],
    }


def host_memory_bytes() -> int:
    """The machine's memory (MemTotal), which the stand-in's one node allocates."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no MemTotal in /proc/meminfo")


def vm_status(printable: str, *, ready: bool, restart_required: bool, created: bool) -> Manifest:
    """Return a VM status as KubeVirt writes it."""
    conditions = [{"type": "Ready", "status": str(ready), "lastTransitionTime": now()}]
    if restart_required:
        conditions.append(
            {
                "type": "RestartRequired",
                "status": "True",
                "reason": "RestartRequired",
                "message": "a non-live-updatable field was changed in the template spec",
                "lastTransitionTime": now(),
            }
        )
    return {
        "printableStatus": printable,
        "ready": ready,
        "created": created,
        "conditions": conditions,
    }
