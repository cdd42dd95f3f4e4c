"""A CRD newer than the worker (version skew), on the real stack.

A platform team upgrades the CRD before the worker, and a user sets a field (or an enum
value) only the newer worker knows. This worker's models cannot read that spec: the instance stalls
naming the field, nothing of it is touched, and deleting it still tears it down.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from tests.activities.lifecycle import SPEC, create, custom, sql
from tests.orchestrator import Orchestrator
from tests.stack import Kubectl
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

NEWER_FIELD = {
    "type": "object",
    "description": "Hibernation windows (a newer dbi).",
    "properties": {"window": {"type": "string"}},
}


@pytest.fixture
def newer_crd(kubectl: Kubectl, repo_root: Path, dbinstance_crd: str) -> Iterator[None]:
    """Serve a CRD one field newer than the models for one test; the committed one after."""
    committed = repo_root / "crds" / "dbinstance.yaml"
    crd = yaml.safe_load(committed.read_text())
    newer = copy.deepcopy(crd)
    schema = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["hibernation"] = NEWER_FIELD
    schema["properties"]["spec"]["properties"]["powerState"]["enum"].append("Hibernated")
    apply = ("apply", "--server-side", "--force-conflicts", "--field-manager=dbi-tests", "-f", "-")
    kubectl(*apply, stdin=json.dumps(newer))
    try:
        yield
    finally:
        kubectl(*apply, stdin=json.dumps(crd))


def message(orchestrator: Orchestrator, namespace: str, kind: str) -> str:
    for c in orchestrator.get(namespace, "db").get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["message"])
    return ""


@pytest.mark.usefixtures("newer_crd")
async def test_a_spec_field_only_a_newer_worker_knows_stalls_and_deletion_still_works(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE kept (n int)")
    vm_before = custom(kube_api, namespace, "virtualmachines", "db")["metadata"]["resourceVersion"]

    orchestrator.patch(namespace, "db", {"hibernation": {"window": "Sun 02:00-04:00"}})
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == ("True", "SpecUnreadable"),
        what="Stalled SpecUnreadable",
    )
    said = message(orchestrator, namespace, "Ready")
    assert "spec.hibernation: Extra inputs are not permitted" in said, said
    assert "deleting the instance still tears it down" in said
    vm_after = custom(kube_api, namespace, "virtualmachines", "db")["metadata"]["resourceVersion"]
    assert vm_after == vm_before  # nothing converged on a stand-in spec
    assert sql(kube_api, namespace, "SELECT count(*) FROM kept") == (0,)

    await orchestrator.delete(namespace, "db")
    assert custom(kube_api, namespace, "virtualmachines", "db") == {}
    claims = k8s.CoreV1Api(kube_api).list_namespaced_persistent_volume_claim(namespace).items
    assert claims == []  # deletionPolicy Delete was read, and followed


@pytest.mark.usefixtures("newer_crd")
async def test_an_enum_value_only_a_newer_worker_knows_stalls_a_new_instance(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Created with powerState Hibernated (the newer CRD's enum): Stalled naming
    spec.powerState, no VM made; deleted, it goes."""
    orchestrator.apply(namespace, "db", {**SPEC, "powerState": "Hibernated"})
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == ("True", "SpecUnreadable"),
        what="Stalled SpecUnreadable",
    )
    assert "spec.powerState: Input should be 'Running' or 'Stopped'" in message(
        orchestrator, namespace, "Ready"
    )
    assert custom(kube_api, namespace, "virtualmachines", "db") == {}
    orchestrator.kubectl("delete", "dbinstance", "db", "-n", namespace, "--timeout=60s")
    assert not orchestrator.kubectl("get", "dbinstance", "-n", namespace, "-o", "name").stdout
