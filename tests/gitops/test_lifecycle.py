"""What kstatus (Flux, kpt, cli-utils), `kubectl wait` and Argo CD conclude from a
DBInstance through its whole life, on the real local stack."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from devstack import gitops
from tests.activities.lifecycle import ready
from tests.gitops.tools import argo_health
from tests.orchestrator import Orchestrator, watching
from tests.stack import Kubectl

pytestmark = pytest.mark.stack

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}
HOLD = "example.com/hold"  # a finalizer of another tool: the deletion waits for it


@pytest.fixture(scope="session")
def kstatus_binary() -> Path:
    return gitops.build()


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def at_generation(obj: dict[str, Any]) -> bool:
    return bool(obj.get("status", {}).get("observedGeneration") == obj["metadata"]["generation"])


async def test_gitops_tools_read_every_stage_of_a_life_right(
    orchestrator: Orchestrator,
    kube_api: Any,
    namespace: str,
    kubectl: Kubectl,
    kstatus_binary: Path,
) -> None:
    """created, provisioning, Ready, spec patched, stalled at the new generation, fixed,
    stopped, deleting: kstatus says InProgress, InProgress, Current, InProgress, Failed,
    Current, Current, Terminating; Argo CD's script Progressing, Progressing, Healthy,
    Progressing, Degraded, Healthy, Suspended, Progressing; and `kubectl wait
    --for=condition=Ready` right after a patch waits for the new generation."""

    def patch(body: Any, kind: str = "merge") -> dict[str, Any]:
        out = kubectl(
            "patch", "dbinstance", "db", "-n", namespace, f"--type={kind}", "-p",
            json.dumps(body), "-o", "json",
        ).stdout  # fmt: skip
        return dict(json.loads(out))

    def get() -> dict[str, Any]:
        return orchestrator.get(namespace, "db")

    seen: dict[str, dict[str, Any]] = {}
    orchestrator.apply(namespace, "db", SPEC)
    seen["created"] = get()  # no watcher runs yet: no pass has seen it
    async with watching(orchestrator, kube_api, namespace):

        def provisioning() -> dict[str, Any] | None:
            obj = get()
            busy = at_generation(obj) and condition(obj, "Reconciling")["status"] == "True"
            return obj if busy else None

        seen["provisioning"] = await orchestrator.until(provisioning, what="a provisioning status")
        await ready(orchestrator, namespace)
        seen["ready"] = get()

        seen["patched"] = patch({"spec": {"healthCheckInterval": "4m"}})
        generation = seen["patched"]["metadata"]["generation"]
        waited = await asyncio.to_thread(
            kubectl, "wait", "--for=condition=Ready", "dbinstance/db", "-n", namespace,
            "--timeout=120s", "-o", "json",
        )  # fmt: skip
        when_ready = json.loads(waited.stdout)
        assert when_ready["status"]["observedGeneration"] == generation
        assert condition(when_ready, "Ready").get("observedGeneration") == generation

        patch({"spec": {"image": "dbi-images/no-such-image"}})

        def stalled() -> dict[str, Any] | None:
            obj = get()
            held = at_generation(obj) and condition(obj, "Stalled")["status"] == "True"
            return obj if held else None

        seen["stalled"] = await orchestrator.until(stalled, what="Stalled at the new generation")
        assert condition(seen["stalled"], "Stalled")["reason"] == "ImageNotFound"

        patch({"spec": {"image": None}})
        await ready(orchestrator, namespace)
        seen["fixed"] = get()

        patch({"spec": {"powerState": "Stopped"}})

        def stopped() -> dict[str, Any] | None:
            obj = get()
            done = at_generation(obj) and obj["status"].get("phase") == "Stopped"
            return obj if done and condition(obj, "Ready")["status"] == "True" else None

        seen["stopped"] = await orchestrator.until(stopped, what="Stopped and Ready")

        patch([{"op": "add", "path": "/metadata/finalizers/-", "value": HOLD}], "json")
        kubectl("delete", "dbinstance", "db", "-n", namespace, "--wait=false")
        seen["deleting"] = get()
        await orchestrator.until(lambda: _release(kubectl, namespace), what="the hold released")
        await orchestrator.until(
            lambda: kubectl("get", "dbinstance", "db", "-n", namespace, check=False).returncode,
            what="the instance gone",
        )

    assert [s for s, _ in gitops.compute(kstatus_binary, seen.values())] == [
        "InProgress", "InProgress", "Current", "InProgress", "Failed", "Current", "Current",
        "Terminating",
    ]  # fmt: skip
    assert [argo_health(obj)[0] for obj in seen.values()] == [
        "Progressing", "Progressing", "Healthy", "Progressing", "Degraded", "Healthy",
        "Suspended", "Progressing",
    ]  # fmt: skip


def _release(kubectl: Kubectl, namespace: str) -> bool:
    """Remove the other tool's finalizer, unless the object changed since it was read."""
    obj = json.loads(kubectl("get", "dbinstance", "db", "-n", namespace, "-o", "json").stdout)
    kept = [f for f in obj["metadata"].get("finalizers", []) if f != HOLD]
    version = obj["metadata"]["resourceVersion"]
    body = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/metadata/finalizers", "value": kept},
    ]
    done = kubectl(
        "patch", "dbinstance", "db", "-n", namespace, "--type=json", "-p", json.dumps(body),
        check=False,
    )  # fmt: skip
    return done.returncode == 0
