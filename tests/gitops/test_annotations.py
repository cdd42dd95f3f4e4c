"""Day-2 requests from kubectl and Git: the dbi.dev/ annotations, each served once per
value and acknowledged in status.served, on the real local stack."""

from __future__ import annotations

from typing import Any

import pytest

from dbi import names
from tests.activities.lifecycle import SPEC, create, custom, ready, sql, vmi_uid
from tests.activities.logins import admin_credential, app_works, secret
from tests.orchestrator import Orchestrator
from tests.stack import Kubectl
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def annotate(kubectl: Kubectl, namespace: str, key: str, value: str | None) -> None:
    change = f"{key}-" if value is None else f"{key}={value}"
    kubectl("annotate", "dbinstance", "db", "-n", namespace, "--overwrite", change)


def differ(a: str, b: str) -> bool:
    """Compare passwords without pytest printing them when an assertion fails."""
    return a != b


async def served(
    orchestrator: Orchestrator, namespace: str, field: str, value: str
) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        obj = orchestrator.get(namespace, "db")
        return obj if obj.get("status", {}).get("served", {}).get(field) == value else None

    found: dict[str, Any] = await orchestrator.until(check, what=f"status.served.{field}={value}")
    return found


async def test_rotate_and_reconcile_requests_are_served_once_per_value(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    kubectl: Kubectl,
) -> None:
    """dbi.dev/rotate-requested-at rotates the app password once per value; applying the
    same value again changes nothing (a reconcile request served after it shows that a
    pass ran and left the password as it was); a new value rotates again.
    dbi.dev/rotate-admin-requested-at rotates dbi's admin password, not the app's."""
    await create(orchestrator, namespace)
    first = secret(kube_api, namespace, "db-credentials")["password"]

    annotate(kubectl, namespace, names.ROTATE_REQUESTED_AT, "2026-12-01T08:00:00Z")
    await served(orchestrator, namespace, "rotateRequestedAt", "2026-12-01T08:00:00Z")
    second = secret(kube_api, namespace, "db-credentials")["password"]
    assert differ(second, first), "the first value rotates"
    assert app_works(kube_api, namespace, second)

    annotate(kubectl, namespace, names.ROTATE_REQUESTED_AT, "2026-12-01T08:00:00Z")
    annotate(kubectl, namespace, names.RECONCILE_REQUESTED_AT, "r1")
    await served(orchestrator, namespace, "reconcileRequestedAt", "r1")
    kept = secret(kube_api, namespace, "db-credentials")["password"]
    assert not differ(kept, second), "the same value again rotates nothing"

    annotate(kubectl, namespace, names.ROTATE_REQUESTED_AT, "2026-12-02T08:00:00Z")
    await served(orchestrator, namespace, "rotateRequestedAt", "2026-12-02T08:00:00Z")
    third = secret(kube_api, namespace, "db-credentials")["password"]
    assert differ(third, second), "a new value rotates again"
    assert app_works(kube_api, namespace, third)
    # The value is not echoed (a transition's timestamp may well be on that day).
    conditions = str(orchestrator.get(namespace, "db")["status"].get("conditions"))
    assert "2026-12-02T08:00:00Z" not in conditions

    admin = admin_credential(kube_api, orchestrator, namespace)["password"]
    annotate(kubectl, namespace, names.ROTATE_ADMIN_REQUESTED_AT, "a1")
    await served(orchestrator, namespace, "rotateAdminRequestedAt", "a1")
    rotated = admin_credential(kube_api, orchestrator, namespace)["password"]
    assert differ(rotated, admin), "the admin password rotates"
    app = secret(kube_api, namespace, "db-credentials")["password"]
    assert not differ(app, third), "the app's password stays"
    await ready(orchestrator, namespace)


async def test_paused_holds_every_action_and_restart_applies_a_deferred_resize(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    kubectl: Kubectl,
) -> None:
    """dbi.dev/paused "true": a spec change is seen but not acted on (status Paused, the VM
    untouched); unpaused, it converges. Under resizePolicy Deferred,
    dbi.dev/restart-requested-at applies the waiting resize by a restart, once: the same
    value again restarts nothing."""
    await create(orchestrator, namespace, {**SPEC, "resizePolicy": "Deferred"})
    cache_size = sql(kube_api, namespace, "SHOW effective_cache_size")
    vm_before = custom(kube_api, namespace, "virtualmachines", "db")["spec"]
    vmi_before = vmi_uid(kube_api, namespace)
    annotate(kubectl, namespace, names.PAUSED_ANNOTATION, "true")
    orchestrator.patch(namespace, "db", {"resources": {"memory": "2Gi"}})

    def paused() -> dict[str, Any] | None:
        obj = orchestrator.get(namespace, "db")
        status = obj.get("status", {})
        at = status.get("observedGeneration") == obj["metadata"]["generation"]
        return obj if at and status.get("phase") == "Paused" else None

    held = await orchestrator.until(paused, what="phase Paused at the new generation")
    reasons = {c["type"]: c["reason"] for c in held["status"]["conditions"]}
    assert reasons["Paused"] == "Paused" and reasons["Ready"] == "Paused"
    # The pass that wrote Paused ran every step before it: what it did is done.
    assert custom(kube_api, namespace, "virtualmachines", "db")["spec"] == vm_before
    assert vmi_uid(kube_api, namespace) == vmi_before
    assert sql(kube_api, namespace, "SHOW effective_cache_size") == cache_size

    annotate(kubectl, namespace, names.PAUSED_ANNOTATION, None)
    await ready(orchestrator, namespace)
    assert sql(kube_api, namespace, "SHOW effective_cache_size") == ("1536MB",)
    assert orchestrator.condition(namespace, "db", "Paused") is None

    orchestrator.patch(namespace, "db", {"resources": {"cpu": 6}})
    deferred = ("False", "RestartRequired")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "SizeSynced") == deferred,
        what="SizeSynced False RestartRequired",
    )
    before = vmi_uid(kube_api, namespace)
    annotate(kubectl, namespace, names.RESTART_REQUESTED_AT, "s1")
    await served(orchestrator, namespace, "restartRequestedAt", "s1")
    await ready(orchestrator, namespace)
    assert sql(kube_api, namespace, "SHOW dbi.vm_cpus") == ("6",)
    restarted = vmi_uid(kube_api, namespace)
    assert restarted not in (None, before)

    # The same values again: nothing restarts, and a reconcile request served after
    # them shows that a pass ran since.
    annotate(kubectl, namespace, names.RESTART_REQUESTED_AT, "s1")
    annotate(kubectl, namespace, names.RECONCILE_REQUESTED_AT, "r1")
    await served(orchestrator, namespace, "reconcileRequestedAt", "r1")
    assert vmi_uid(kube_api, namespace) == restarted
