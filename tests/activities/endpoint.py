"""The VM address the stand-in gives an instance."""

from __future__ import annotations

from typing import Any

from tests.activities.lifecycle import custom


def vm_address(kube_api: Any, namespace: str) -> str | None:
    interfaces = custom(kube_api, namespace, "virtualmachineinstances", "db").get("status", {})
    found = interfaces.get("interfaces") or [{}]
    address = found[0].get("ipAddress")
    return str(address) if address else None
