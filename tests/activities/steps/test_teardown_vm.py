"""Deletion on the real stack (deletionPolicy Retain holds against every way of deleting,
and a retained disk is taken over only when the user says so), and teardown_vm's
decision (plain data)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from activities.infra import manifests, ownership
from activities.infra.admin_credential import name_for
from activities.steps import teardown_vm
from dbi import names
from dbi.config import Config
from tests.activities.lifecycle import SPEC, custom, ready, uri
from tests.orchestrator import IMAGES_NAMESPACE, Orchestrator, watching
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

RETAIN = {**SPEC, "deletionPolicy": "Retain"}
KEPT = (
    ("virtualmachines", "db"),
    ("persistentvolumeclaims", "db-data"),
    ("persistentvolumeclaims", manifests.root_claim_name("db", f"{IMAGES_NAMESPACE}/postgres-18")),
    ("secrets", "db-cloudinit"),
)


def admin_kept(kube_api: Any, uid: str) -> bool:
    """Whether the admin credential of the instance with ``uid`` is (still) in dbi's namespace."""
    try:
        k8s.CoreV1Api(kube_api).read_namespaced_secret(name_for(uid), Config().namespace)
    except k8s.ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


def write_rows(kube_api: Any, namespace: str) -> None:
    with psycopg.connect(uri(kube_api, namespace, "db"), connect_timeout=3, autocommit=True) as c:
        c.execute("CREATE TABLE kept (n int)")
        c.execute("INSERT INTO kept VALUES (42)")


def rows(kube_api: Any, namespace: str) -> Any:
    with psycopg.connect(uri(kube_api, namespace, "db"), connect_timeout=3) as c:
        return c.execute("SELECT n FROM kept").fetchall()


def metadata(kube_api: Any, namespace: str, plural: str, name: str) -> dict[str, Any] | None:
    """Return an object's metadata, or None when it does not exist."""
    core = k8s.CoreV1Api(kube_api)
    try:
        if plural == "virtualmachines":
            return custom(kube_api, namespace, plural, name).get("metadata")
        found: Any = (
            core.read_namespaced_secret(name, namespace)
            if plural == "secrets"
            else core.read_namespaced_persistent_volume_claim(name, namespace)
        )
        return dict(k8s.ApiClient().sanitize_for_serialization(found.metadata))
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise


def volume_of(kube_api: Any, namespace: str) -> str:
    claim = k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim("db-data", namespace)
    assert claim.spec is not None and claim.spec.volume_name
    return str(claim.spec.volume_name)


def gone(orchestrator: Orchestrator, namespace: str) -> bool:
    found = orchestrator.kubectl("get", "dbinstances", "-n", namespace, "-o", "json").stdout
    return not json.loads(found)["items"]


async def delete(orchestrator: Orchestrator, namespace: str, how: str) -> None:
    """Delete instance ``db`` with the cascade ``how``, and return once it is gone."""
    await asyncio.to_thread(
        orchestrator.kubectl,
        "delete",
        "dbinstance",
        "db",
        "-n",
        namespace,
        f"--cascade={how}",
        "--timeout=90s",
    )
    await orchestrator.until(lambda: gone(orchestrator, namespace), what="the instance gone")


def app_secret_cascaded(kube_api: Any, namespace: str, how: str) -> bool:
    """Whether the garbage collector has done what it does while the instance waits on
    its finalizer, on the app Secret (an owned child): deleted it (foreground, or once the
    finalizer was removed), released it (orphan); nothing yet for a background deletion."""
    meta = metadata(kube_api, namespace, "secrets", "db-credentials")
    if how == "background":
        return True  # the collector acts once the instance is gone, after the teardown
    if how == "orphan":
        return meta is not None and not meta.get("ownerReferences")
    return meta is None


@pytest.mark.parametrize("how", ["background", "foreground", "orphan", "finalizer-removed-by-hand"])
async def test_retain_keeps_the_data_whichever_way_the_instance_is_deleted(
    orchestrator: Orchestrator, namespace: str, kube_api: Any, how: str
) -> None:
    """Under Retain, a deletion by any cascade (or with the finalizer removed by hand)
    leaves the VM, its disk, its volume (reclaimPolicy Retain) and the cloud-init and admin
    Secrets, marked with the instance's UID and owned by nothing, even when the garbage
    collector acts while dbi is down; once dbi is back the workflow completes, and an
    instance of the same name that adopts them has the rows written before."""
    async with watching(orchestrator, kube_api, namespace):
        db = await ready_instance(orchestrator, namespace, RETAIN)
        write_rows(kube_api, namespace)
    old = db["metadata"]["uid"]
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    await handle.terminate("dbi is down while the instance is deleted")  # no teardown runs

    cascade = "background" if how == "finalizer-removed-by-hand" else how
    orchestrator.kubectl(
        "delete", "dbinstance", "db", "-n", namespace, f"--cascade={cascade}", "--wait=false"
    )
    if how == "finalizer-removed-by-hand":
        remove = json.dumps([{"op": "remove", "path": "/metadata/finalizers"}])
        orchestrator.kubectl(
            "patch", "dbinstance", "db", "-n", namespace, "--type=json", "-p", remove
        )
    await orchestrator.until(
        lambda: app_secret_cascaded(kube_api, namespace, how), what="the garbage collector's part"
    )
    async with watching(orchestrator, kube_api, namespace):
        # dbi is back: its resync starts the workflow, which tears the instance down.
        await orchestrator.until(lambda: gone(orchestrator, namespace), what="the instance gone")
        for plural, name in KEPT:
            meta = metadata(kube_api, namespace, plural, name)
            assert meta is not None, f"{plural}/{name} was deleted"
            assert not meta.get("deletionTimestamp"), f"{plural}/{name} is being deleted"
            assert not meta.get("ownerReferences"), f"{plural}/{name} is still owned"
            assert meta["annotations"][names.INSTANCE_UID_ANNOTATION] == old
            assert meta["labels"][names.INSTANCE_LABEL] == "db"
        assert admin_kept(kube_api, old)
        volume = k8s.CoreV1Api(kube_api).read_persistent_volume(volume_of(kube_api, namespace))
        assert volume.spec is not None
        assert volume.spec.persistent_volume_reclaim_policy == "Retain"
        assert volume.metadata is not None and volume.metadata.annotations is not None
        assert volume.metadata.annotations[names.INSTANCE_UID_ANNOTATION] == old

        orchestrator.apply(namespace, "db", RETAIN, annotations={names.ADOPT_ANNOTATION: old})
        await ready(orchestrator, namespace)
        assert rows(kube_api, namespace) == [(42,)]


async def ready_instance(
    orchestrator: Orchestrator, namespace: str, spec: dict[str, Any]
) -> dict[str, Any]:
    orchestrator.apply(namespace, "db", spec)
    return await ready(orchestrator, namespace)


async def test_a_retained_disk_is_adopted_only_when_the_user_says_so(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A new instance with a retained instance's name stalls, naming the retained object
    and how to adopt it; nothing of it changes. Annotated with the old UID, it takes the
    objects over and has the rows; deleted again under Delete, everything goes."""
    old = (await ready_instance(orchestrator, namespace, RETAIN))["metadata"]["uid"]
    write_rows(kube_api, namespace)
    await delete(orchestrator, namespace, "background")
    before = {n: metadata(kube_api, namespace, p, n) for p, n in KEPT}

    orchestrator.apply(namespace, "db", SPEC)
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == ("True", "RetainedObject"),
        what="Stalled RetainedObject",
    )
    message = orchestrator.get(namespace, "db")["status"]["conditions"]
    stalled = next(c["message"] for c in message if c["type"] == "Stalled")
    assert "Secret db-cloudinit" in stalled and f"{names.ADOPT_ANNOTATION}={old}" in stalled
    for plural, name in KEPT:
        meta = metadata(kube_api, namespace, plural, name)
        assert meta is not None and meta["resourceVersion"] == (before[name] or {}).get(
            "resourceVersion"
        )

    annotate = f"{names.ADOPT_ANNOTATION}={old}"
    orchestrator.kubectl("annotate", "dbinstance", "db", "-n", namespace, annotate)
    await ready(orchestrator, namespace)
    assert rows(kube_api, namespace) == [(42,)]
    new = orchestrator.get(namespace, "db")["metadata"]["uid"]
    for plural, name in KEPT:
        meta = metadata(kube_api, namespace, plural, name)
        assert meta is not None and meta["annotations"][names.INSTANCE_UID_ANNOTATION] == new
        assert [r["uid"] for r in meta.get("ownerReferences") or []] == [new]  # Delete: owned

    volume = volume_of(kube_api, namespace)
    await delete(orchestrator, namespace, "background")
    for plural, name in KEPT:
        assert metadata(kube_api, namespace, plural, name) is None, f"{plural}/{name} is left"
    assert not admin_kept(kube_api, new)
    assert not admin_kept(kube_api, old)  # taken over with the data, then deleted with it

    def volume_gone() -> bool:
        try:
            k8s.CoreV1Api(kube_api).read_persistent_volume(volume)
        except k8s.ApiException as e:
            return bool(e.status == 404)
        return False

    await orchestrator.until(volume_gone, what="the volume deleted with its claim")


async def test_retain_keeps_the_data_when_the_namespace_is_deleted(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Deleting the namespace deletes every object in it, but the volume of a Retain
    instance stays (Released, reclaimPolicy Retain, marked with the instance), and so
    does its admin credential, in dbi's namespace. Recovered as docs/operations.md says
    (the volume freed, a claim made for it, the instance adopting it), the instance has
    the rows written before."""
    core = k8s.CoreV1Api(kube_api)
    old = (await ready_instance(orchestrator, namespace, RETAIN))["metadata"]["uid"]
    write_rows(kube_api, namespace)
    volume = volume_of(kube_api, namespace)
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))

    await asyncio.to_thread(core.delete_namespace, namespace)
    await asyncio.wait_for(handle.result(), 90)

    def namespace_gone() -> bool:
        try:
            core.read_namespace(namespace)
        except k8s.ApiException as e:
            return bool(e.status == 404)
        return False

    await orchestrator.until(namespace_gone, timeout=90, what="the namespace gone")
    found = await orchestrator.until(
        lambda: (
            (v := core.read_persistent_volume(volume)).status and v.status.phase == "Released" and v
        ),
        what="the volume Released",
    )
    assert found.spec.persistent_volume_reclaim_policy == "Retain"
    assert found.metadata.annotations[names.INSTANCE_UID_ANNOTATION] == old
    assert found.metadata.annotations[names.VOLUME_INSTANCE_ANNOTATION] == f"{namespace}/db"
    assert admin_kept(kube_api, old)

    # The recovery, step by step as docs/operations.md has it, in a namespace of that name.
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    core.patch_persistent_volume(volume, [{"op": "remove", "path": "/spec/claimRef"}])
    core.create_namespaced_persistent_volume_claim(
        namespace,
        k8s.V1PersistentVolumeClaim(
            metadata=k8s.V1ObjectMeta(
                name="db-data",
                labels={names.INSTANCE_LABEL: "db"},
                annotations={names.INSTANCE_UID_ANNOTATION: old},
            ),
            spec=k8s.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=k8s.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                volume_name=volume,
            ),
        ),
    )
    orchestrator.apply(namespace, "db", RETAIN, annotations={names.ADOPT_ANNOTATION: old})
    await ready(orchestrator, namespace)
    assert rows(kube_api, namespace) == [(42,)]
    assert volume_of(kube_api, namespace) == volume


def _child(kind: str, name: str, *, owned: bool) -> ownership.Child:
    meta: dict[str, Any] = {"annotations": {names.INSTANCE_UID_ANNOTATION: "u-1"}}
    if owned:
        meta["ownerReferences"] = [{"uid": "u-1", "kind": "DBInstance"}]
    return ownership.Child(kind, name, meta)


VM_OWNED = _child("VirtualMachine", "db", owned=True)
VM_RELEASED = _child("VirtualMachine", "db", owned=False)
APP = _child("Secret", "db-credentials", owned=True)
TV = teardown_vm.Action


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(
            teardown_vm.Observation(uid="u-1", retain=False, kept=(VM_OWNED,), rest=(APP,)),
            "Deleting",
            TV.DELETE,
            id="delete-deletes-everything-of-the-instances",
        ),
        pytest.param(
            teardown_vm.Observation(uid="u-1", retain=False, kept=(), rest=()),
            "Deleted",
            None,
            id="delete-done",
        ),
        pytest.param(
            teardown_vm.Observation(uid="u-1", retain=True, kept=(VM_OWNED,), rest=()),
            "Releasing",
            TV.RELEASE,
            id="retain-releases-what-it-keeps",
        ),
        pytest.param(
            teardown_vm.Observation(uid="u-1", retain=True, kept=(VM_RELEASED,), rest=(APP,)),
            "Releasing",
            TV.RELEASE,
            id="retain-deletes-the-credentials-secret",
        ),
        pytest.param(
            teardown_vm.Observation(
                uid="u-1", retain=True, kept=(VM_RELEASED,), rest=(), volume_protected=False
            ),
            "Releasing",
            TV.RELEASE,
            id="retain-protects-the-volume",
        ),
        pytest.param(
            teardown_vm.Observation(uid="u-1", retain=True, kept=(VM_RELEASED,), rest=()),
            "Released",
            None,
            id="retain-done-keeps-the-released-objects",
        ),
    ],
)
def test_teardown_vm(
    obs: teardown_vm.Observation, reason: str, action: teardown_vm.Action | None
) -> None:
    """Delete takes everything of the instance's; Retain releases what it keeps, protects
    the volume and deletes the rest; each is Pending until done (plain data)."""
    decided = teardown_vm.decide(obs)
    assert (decided.result.reason, decided.action) == (reason, action)
