"""The compute steps on the real stack: stop and start, resize, drift, Events, deletion."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any, cast

import psycopg
import pytest
from kubernetes import client as k8s
from temporalio.service import RPCError

from activities.infra import manifests
from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.steps import loop, vm
from dbi import names
from dbi.config import Config
from dbi.messages import ResizeResult, Wake
from dbi.steps import StepInput
from tests.activities.lifecycle import (
    KUBEVIRT,
    SPEC,
    create,
    custom,
    events_of,
    ready,
    sql,
    vmi_uid,
)
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def listed(
    kube_api: Any, namespace: str, plural: str, *, label_selector: str | None = None
) -> list[dict[str, Any]]:
    found = k8s.CustomObjectsApi(kube_api).list_namespaced_custom_object(
        *KUBEVIRT, namespace, plural, label_selector=label_selector
    )
    return cast(list[dict[str, Any]], cast(dict[str, Any], found)["items"])


async def test_stop_and_start_keep_the_data(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Stopped: phase Stopped, Ready, unreachable. Running again: Ready, and the rows are there."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE kept (n int)")
    sql(kube_api, namespace, "INSERT INTO kept VALUES (42)")

    orchestrator.patch(namespace, "db", {"powerState": "Stopped"})
    stopped = await ready(orchestrator, namespace)
    assert stopped["status"]["phase"] == "Stopped"
    assert orchestrator.condition(namespace, "db", "DatabaseHealthy") == ("True", "Stopped")
    with pytest.raises(psycopg.OperationalError):
        sql(kube_api, namespace, "SELECT 1")

    orchestrator.patch(namespace, "db", {"powerState": "Running"})
    running = await ready(orchestrator, namespace)
    assert running["status"]["phase"] == "Running"
    assert sql(kube_api, namespace, "SELECT n FROM kept") == (42,)


async def test_a_cpu_change_beyond_the_hotplug_limit_restarts_under_restart(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """resizePolicy Restart: a CPU change that needs a restart is applied by one."""
    await create(orchestrator, namespace)
    before = vmi_uid(kube_api, namespace)
    orchestrator.patch(namespace, "db", {"resources": {"cpu": 6}})
    await ready(orchestrator, namespace)
    assert vmi_uid(kube_api, namespace) not in (None, before)
    assert sql(kube_api, namespace, "SHOW dbi.vm_cpus") == ("6",)


async def test_a_deferred_restart_waits_for_force_resize(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """resizePolicy Deferred: RestartRequired until force_resize, which returns once resized."""
    await create(orchestrator, namespace, {**SPEC, "resizePolicy": "Deferred"})
    orchestrator.patch(namespace, "db", {"resources": {"cpu": 6}})
    deferred = ("False", "RestartRequired")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "SizeSynced") == deferred,
        what="SizeSynced False RestartRequired",
    )
    await asyncio.sleep(2)
    assert orchestrator.condition(namespace, "db", "SizeSynced") == deferred
    assert sql(kube_api, namespace, "SHOW dbi.vm_cpus") == ("1",)

    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    result = await handle.execute_update("force_resize", result_type=ResizeResult)
    assert result.resized
    await ready(orchestrator, namespace)
    assert sql(kube_api, namespace, "SHOW dbi.vm_cpus") == ("6",)


async def test_memory_grows_live_and_storage_grows(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Memory within the hot-plug limit applies without a restart; storage grows with the PVC."""
    await create(orchestrator, namespace)
    before = vmi_uid(kube_api, namespace)
    orchestrator.patch(namespace, "db", {"resources": {"memory": "2Gi", "storage": "3Gi"}})
    db = await ready(orchestrator, namespace)
    assert vmi_uid(kube_api, namespace) == before
    assert sql(kube_api, namespace, "SHOW effective_cache_size") == ("1536MB",)
    claim = k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim("db-data", namespace)
    assert claim.status is not None and (claim.status.capacity or {}).get("storage") == "3Gi"
    assert db["status"]["observed"]["storage"] == "3Gi"


async def test_quantities_that_are_not_whole_units_converge(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """memory 1000M (953.67 MiB) gets 954 MiB and the instance is Ready, not Resizing for
    ever; storage 1500Mi gets the 2Gi the provisioner allocates (whole GiB), which is not
    "below the disk's capacity"."""
    spec = {**SPEC, "resources": {"cpu": 1, "memory": "1000M", "storage": "1500Mi"}}
    db = await create(orchestrator, namespace, spec)
    assert sql(kube_api, namespace, "SHOW dbi.vm_memory_bytes") == (str(954 * 2**20),)
    assert db["status"]["observed"]["storage"] == "2Gi"
    assert orchestrator.condition(namespace, "db", "SizeSynced") == ("True", "SizeSynced")


def message(orchestrator: Orchestrator, namespace: str, kind: str) -> str:
    for c in orchestrator.get(namespace, "db").get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return str(c["message"])
    return ""


async def test_a_vm_no_node_can_hold_is_pending_unschedulable_until_it_fits(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """memory 1Ti is within the CRD's bounds but no node of this machine holds it: the
    VMI waits for a node (as KubeVirt's does), the instance is Pending with reason
    Unschedulable and the scheduler's message, never Stalled; a size that fits starts it."""
    orchestrator.apply(
        namespace, "db", {**SPEC, "resources": {**SPEC["resources"], "memory": "1Ti"}}
    )
    await orchestrator.until(
        lambda: (
            orchestrator.condition(namespace, "db", "PowerSynced") == ("False", "Unschedulable")
        ),
        what="PowerSynced False Unschedulable",
    )
    assert "Insufficient memory" in message(orchestrator, namespace, "PowerSynced")
    assert "spec.resources.memory" in message(orchestrator, namespace, "PowerSynced")
    assert orchestrator.condition(namespace, "db", "Stalled") == ("False", "Unschedulable")
    assert orchestrator.condition(namespace, "db", "Ready") == ("False", "Unschedulable")

    orchestrator.patch(namespace, "db", {"resources": {"memory": "1Gi"}})
    await ready(orchestrator, namespace)
    assert sql(kube_api, namespace, "SHOW dbi.vm_memory_bytes") == (str(2**30),)


async def test_a_disk_its_class_cannot_expand_stalls_naming_the_class(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A storage grow on a StorageClass without allowVolumeExpansion (the API server would
    refuse the claim's new request) stalls with StorageNotExpandable naming the class,
    the disk and its rows untouched; once the class allows it, dbi retry grows it."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE kept (n int)")
    sql(kube_api, namespace, "INSERT INTO kept VALUES (7)")
    classes = k8s.StorageV1Api(kube_api)
    claims = k8s.CoreV1Api(kube_api)
    claim: Any = claims.read_namespaced_persistent_volume_claim("db-data", namespace)
    name = str(claim.spec.storage_class_name)
    classes.patch_storage_class(name, {"allowVolumeExpansion": False})
    try:
        orchestrator.patch(namespace, "db", {"resources": {"storage": "3Gi"}})
        await orchestrator.until(
            lambda: (
                orchestrator.condition(namespace, "db", "SizeSynced")
                == ("False", "StorageNotExpandable")
            ),
            what="SizeSynced False StorageNotExpandable",
        )
        assert f"StorageClass {name} does not allow volume expansion" in message(
            orchestrator, namespace, "SizeSynced"
        )
        assert orchestrator.condition(namespace, "db", "Stalled") == (
            "True",
            "StorageNotExpandable",
        )
        claim = claims.read_namespaced_persistent_volume_claim("db-data", namespace)
        assert claim.spec.resources.requests["storage"] == "1Gi"
        assert sql(kube_api, namespace, "SELECT n FROM kept") == (7,)
    finally:
        classes.patch_storage_class(name, {"allowVolumeExpansion": True})
    orchestrator.kubectl(
        "annotate", "dbinstance", "db", "-n", namespace, "dbi.dev/reconcile-requested-at=now"
    )
    db = await ready(orchestrator, namespace)
    assert db["status"]["observed"]["storage"] == "3Gi"
    assert sql(kube_api, namespace, "SELECT n FROM kept") == (7,)


async def test_a_hand_edit_of_the_vm_is_put_back_and_foreign_fields_stay(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Someone edits the VM's CPU: the next pass restores it; a field another manager owns stays."""
    await create(orchestrator, namespace)
    edit = {
        "metadata": {"annotations": {"team.example/owner": "payments"}},
        "spec": {"template": {"spec": {"domain": {"cpu": {"sockets": 3}}}}},
    }
    k8s.CustomObjectsApi(kube_api).patch_namespaced_custom_object(
        *KUBEVIRT, namespace, "virtualmachines", "db", edit
    )

    def sockets() -> int:
        vm = custom(kube_api, namespace, "virtualmachines", "db")
        return int(vm["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"])

    await orchestrator.until(lambda: sockets() == 1, timeout=60, what="the CPU put back")
    vm = custom(kube_api, namespace, "virtualmachines", "db")
    assert vm["metadata"]["annotations"]["team.example/owner"] == "payments"


async def test_the_vm_step_retried_after_a_crash_creates_one_vm(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """A vm activity run again (as after a worker crash mid-step) leaves exactly one VM."""
    orchestrator.apply(namespace, "lone", SPEC)
    db = orchestrator.get(namespace, "lone")
    ctx = Context(kube=Kube(kube_api), config=Config())
    step_input = StepInput(namespace=namespace, name="lone", uid=db["metadata"]["uid"])
    first = await asyncio.to_thread(loop.run, ctx, vm.STEP, step_input)
    second = await asyncio.to_thread(loop.run, ctx, vm.STEP, step_input)
    # The first run creates the VM and, having acted, observes it at once.
    assert (first.reason, second.reason) == ("VMProvisioned", "VMProvisioned")
    selector = f"{names.INSTANCE_LABEL}=lone"
    assert len(listed(kube_api, namespace, "virtualmachines", label_selector=selector)) == 1


async def test_idle_passes_emit_no_event_and_a_transition_emits_one_each(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Ten passes that change nothing add no Event; a change is announced once per condition."""
    await create(orchestrator, namespace)
    await asyncio.sleep(1)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    before = events_of(kube_api, namespace)
    for n in range(10):
        await handle.signal("wake", Wake(reason=f"test idle pass {n}"))
        await asyncio.sleep(0.4)
    assert events_of(kube_api, namespace) == before

    k8s.CoreV1Api(kube_api).delete_namespaced_service("db-metrics", namespace)
    await orchestrator.until(
        lambda: len(events_of(kube_api, namespace)) > len(before), what="an Event for the change"
    )
    await ready(orchestrator, namespace)
    for n in range(5):
        await handle.signal("wake", Wake(reason=f"test idle pass after {n}"))
        await asyncio.sleep(0.4)
    added = Counter(events_of(kube_api, namespace)) - Counter(before)
    assert added, "the change produced no Event"
    assert all(count == 1 for count in added.values()), added


@pytest.mark.parametrize(("policy", "kept"), [("Delete", False), ("Retain", True)])
async def test_deletion_leaves_what_the_policy_says(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    policy: str,
    kept: bool,
) -> None:
    """Delete removes the VM and disk; Retain keeps them released; instance and workflow end."""
    await create(orchestrator, namespace, {**SPEC, "deletionPolicy": policy})
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    # In a thread: the worker runs on this event loop, and kubectl waits for the teardown.
    await asyncio.to_thread(
        orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace, "--timeout=60s"
    )
    assert await asyncio.wait_for(handle.result(), 60) == "deleted"
    core = k8s.CoreV1Api(kube_api)
    if kept:
        vms = listed(kube_api, namespace, "virtualmachines")
        assert [v["metadata"]["name"] for v in vms] == ["db"]
        assert not vms[0]["metadata"].get("ownerReferences")
        # The data disk, and the root disk the kept VM boots.
        claims = core.list_namespaced_persistent_volume_claim(namespace).items
        assert sorted(str(c.metadata.name) for c in claims if c.metadata) == sorted(
            ["db-data", str(manifests.root_of(vms[0]))]
        )
        assert not any(c.metadata.owner_references for c in claims if c.metadata)
        kept_secret = core.read_namespaced_secret("db-cloudinit", namespace)
        assert kept_secret.metadata is not None and not kept_secret.metadata.owner_references
    else:
        await orchestrator.until(
            lambda: (
                not listed(kube_api, namespace, "virtualmachines")
                and not core.list_namespaced_persistent_volume_claim(namespace).items
            ),
            what="the VM and its disk gone",
        )
    remaining = orchestrator.kubectl("get", "dbinstances", "-n", namespace, "-o", "json").stdout
    assert json.loads(remaining)["items"] == []


async def test_deleting_the_namespace_of_a_new_instance_tears_it_down(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """`kubectl delete namespace` right after an apply: a step that may no longer create
    in it waits instead of failing, the instance is torn down, its workflow ends, and the
    namespace goes away (no finalizer is left behind)."""
    orchestrator.apply(namespace, "db", SPEC)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))

    async def started() -> None:
        while True:
            try:
                await handle.describe()
                return
            except RPCError:
                await asyncio.sleep(0.05)

    await asyncio.wait_for(started(), 30)
    core = k8s.CoreV1Api(kube_api)
    await asyncio.to_thread(core.delete_namespace, namespace)
    ended = await asyncio.wait_for(handle.result(), 90)
    assert ended in {"deleted", "the instance no longer exists"}

    def namespace_gone() -> bool:
        try:
            core.read_namespace(namespace)
        except k8s.ApiException as e:
            return bool(e.status == 404)
        return False

    await orchestrator.until(namespace_gone, timeout=60, what="the namespace gone")
    # No step ran out of retries (a local activity's failure is a marker with a failure).
    failed = [
        e
        for e in (await handle.fetch_history()).events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.HasField("failure")
    ]
    assert failed == []
