"""``dbi switchover NAME [--to MEMBER]``: make another member of an instance with
replicas the primary, and wait until it is.

It writes the annotations a user or Git would (``dbi.dev/switchover-to``, and
``dbi.dev/switchover-requested-at`` with the time), then waits until the instance's
status says the request was served, printing the members' states as they change. It
exits with the other operator commands' codes (``commands.operate``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s

from commands.cluster import Kube, read_instance
from commands.operate import FAILED, NOT_FOUND, OK, REFUSED, TIMED_OUT, Answer
from dbi import names

POLL_SECONDS = 1.0


def _members(obj: dict[str, Any]) -> str:
    status = obj.get("status") or {}
    found = [f"{m['name']} {m['role']} {m['state']}" for m in status.get("members") or []]
    return ", ".join(found)


async def switchover(
    kube: Kube, namespace: str, name: str, *, to: str | None, timeout: float | None = None
) -> Answer:
    """Ask for a switchover (to ``to``, else the replica that replayed most) and wait."""
    found = read_instance(kube, namespace, name)
    if found is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    if not (found.get("spec") or {}).get("instances", 1) > 1:
        return Answer(REFUSED, f"dbi: {namespace}/{name} has no replica (spec.instances)")
    before = (found.get("status") or {}).get("primary") or name
    if to == before:
        return Answer(OK, f"{to} is the primary already")
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    annotations = {names.SWITCHOVER_REQUESTED_AT: stamp, names.SWITCHOVER_TO: to}
    try:
        kube.objects().patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            namespace,
            names.PLURAL,
            name,
            {"metadata": {"annotations": annotations}},
        )
    except k8s.ApiException as e:
        return Answer(FAILED, f"dbi: the switchover could not be asked for: {e.reason}")
    print(f"switchover of {namespace}/{name} asked for ({stamp})", file=sys.stderr)
    deadline = None if timeout is None else time.monotonic() + timeout
    said = ""
    while deadline is None or time.monotonic() < deadline:
        obj = read_instance(kube, namespace, name) or {}
        status = obj.get("status") or {}
        if (status.get("served") or {}).get("switchoverRequestedAt") == stamp:
            primary = status.get("primary")
            return Answer(OK, f"switched over: {primary} is the primary ({_members(obj)})")
        now = _members(obj)
        if now != said:
            print(f"  {now}", file=sys.stderr)
            said = now
        await asyncio.sleep(POLL_SECONDS)
    return Answer(
        TIMED_OUT,
        f"dbi: the switchover did not finish within {timeout:g}s; it goes on "
        f"(dbi describe {name} -n {namespace})",
    )
