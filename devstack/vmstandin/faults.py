"""Fault injection for tests, through the Kubernetes API: crash a VM, or make it fail to boot.

The stand-in acts on annotations of the VirtualMachine, so a test asks for a fault
exactly as it would change anything else, and the orchestrator sees only what KubeVirt
would show (a Failed VMI, a restart, a VM that does not come up).
"""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client as k8s

from devstack.vmstandin.kubevirt import CRASH_ANNOTATION, FAIL_BOOT_ANNOTATION


def _annotate(api: Any, namespace: str, name: str, annotations: dict[str, str | None]) -> None:
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        "kubevirt.io",
        "v1",
        namespace,
        "virtualmachines",
        name,
        {"metadata": {"annotations": annotations}},
    )


def crash(api: Any, namespace: str, name: str) -> None:
    """Kill the VM's PostgreSQL at once; its VMI fails, and the run strategy decides the rest."""
    _annotate(api, namespace, name, {CRASH_ANNOTATION: uuid.uuid4().hex})


def fail_boot(api: Any, namespace: str, name: str, *, failing: bool = True) -> None:
    """Make the VM fail to boot (VMI Failed, CrashLoopBackOff) until ``failing`` is False."""
    _annotate(api, namespace, name, {FAIL_BOOT_ANNOTATION: "true" if failing else None})
