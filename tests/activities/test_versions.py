"""PostgreSQL versions on the local stack: a VM boots the build its image names (the
dev images' ``dbi.dev/postgresql-version`` label); the health step publishes the running
version and stalls, naming both, when its major is not ``spec.version``; preflight
refuses a labelled image of another major; a new ``spec.image`` repaves the root disk
and keeps the data disk; a one-disk instance keeps working and is told how to move."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client as k8s

from activities.infra import manifests
from dbi import names
from devstack import postgresql
from tests.activities.lifecycle import SPEC, create, custom, events_of, ready, sql
from tests.orchestrator import IMAGES_NAMESPACE, Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def running(build: str) -> str:
    """What ``server_version`` says of a build: 16.15.0 reports 16.15."""
    return build.rsplit(".", 1)[0]


def claims(kube_api: Any, namespace: str, disk: str) -> dict[str, dict[str, Any]]:
    """The instance ``db``'s claims of one kind (``root`` or ``data``), by name."""
    selector = f"{names.INSTANCE_LABEL}=db,{manifests.DISK_LABEL}={disk}"
    found = k8s.CoreV1Api(kube_api).list_namespaced_persistent_volume_claim(
        namespace, label_selector=selector
    )
    listed = [k8s.ApiClient().sanitize_for_serialization(c) for c in found.items]
    return {c["metadata"]["name"]: c for c in listed}


def condition_message(db: dict[str, Any], kind: str) -> str:
    return str(next(c for c in db["status"]["conditions"] if c["type"] == kind)["message"])


async def test_an_instance_runs_the_version_its_image_names(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    db = await create(orchestrator, namespace, {**SPEC, "version": 16})
    assert db["status"]["observed"]["postgresVersion"] == running(postgresql.BY_MAJOR[16])
    assert db["status"]["observed"]["image"] == f"{IMAGES_NAMESPACE}/postgres-16"


async def test_a_labelled_image_of_another_major_is_refused_before_a_vm(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    spec: dict[str, Any] = {**SPEC, "version": 17, "image": f"{IMAGES_NAMESPACE}/postgres-16"}
    orchestrator.apply(namespace, "db", spec)
    stalled = ("True", "ImageVersionMismatch")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled True ImageVersionMismatch",
    )
    message = condition_message(orchestrator.get(namespace, "db"), "SpecValid")
    assert "spec.image" in message and "PostgreSQL 16.15.0" in message
    assert "spec.version is 17" in message
    assert custom(kube_api, namespace, "virtualmachines", "db") == {}


async def test_an_unlabelled_image_of_another_major_is_reported_not_run_as_asked(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """An image without the label passes preflight; the stand-in boots its default
    build (18) and the health step names the mismatch."""
    image: dict[str, Any] = {
        "apiVersion": "harvesterhci.io/v1beta1",
        "kind": "VirtualMachineImage",
        "metadata": {"name": f"unlabelled-{namespace}"[:63], "namespace": IMAGES_NAMESPACE},
        "spec": {"displayName": "no version label", "sourceType": "download"},
    }
    objects = k8s.CustomObjectsApi(kube_api)
    objects.create_namespaced_custom_object(
        "harvesterhci.io", "v1beta1", IMAGES_NAMESPACE, "virtualmachineimages", image
    )
    try:
        spec = {**SPEC, "version": 17, "image": f"{IMAGES_NAMESPACE}/{image['metadata']['name']}"}
        orchestrator.apply(namespace, "db", spec)
        stalled = ("True", "VersionMismatch")
        await orchestrator.until(
            lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
            what="Stalled True VersionMismatch",
        )
        db = orchestrator.get(namespace, "db")
        now = running(postgresql.VERSION)
        assert f"PostgreSQL {now} runs, but spec.version is 17" in condition_message(
            db, "DatabaseHealthy"
        )
        assert db["status"]["observed"]["postgresVersion"] == now
    finally:
        objects.delete_namespaced_custom_object(
            "harvesterhci.io",
            "v1beta1",
            IMAGES_NAMESPACE,
            "virtualmachineimages",
            image["metadata"]["name"],
        )


async def test_a_new_image_repaves_the_root_disk_and_keeps_every_row(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """16.13 → 16.15: a new root disk from the new image, the VM restarted on it, the
    old root disk deleted, the data disk (the same claim, the same volume) and its rows
    kept; status.observed shows the version before and after, Events record it."""
    old, new = f"{IMAGES_NAMESPACE}/postgres-16.13", f"{IMAGES_NAMESPACE}/postgres-16.15"
    db = await create(orchestrator, namespace, {**SPEC, "version": 16, "image": old})
    assert db["status"]["observed"]["postgresVersion"] == "16.13"
    assert db["status"]["observed"]["image"] == old
    await asyncio.to_thread(
        sql, kube_api, namespace, "CREATE TABLE kept AS SELECT generate_series(1, 1000) AS n"
    )
    data_before = claims(kube_api, namespace, manifests.DATA)
    roots_before = set(claims(kube_api, namespace, manifests.ROOT))
    assert len(data_before) == 1 and len(roots_before) == 1

    orchestrator.patch(namespace, "db", {"image": new})

    def repaved() -> dict[str, Any] | None:
        found = orchestrator.get(namespace, "db")
        observed = found.get("status", {}).get("observed", {})
        return found if observed.get("postgresVersion") == "16.15" else None

    await orchestrator.until(repaved, what="PostgreSQL 16.15 running", timeout=180)
    db = await ready(orchestrator, namespace)
    assert db["status"]["observed"]["image"] == new
    assert await asyncio.to_thread(sql, kube_api, namespace, "SELECT count(*) FROM kept") == (1000,)
    data_after = claims(kube_api, namespace, manifests.DATA)
    assert {n: c["metadata"]["uid"] for n, c in data_after.items()} == {
        n: c["metadata"]["uid"] for n, c in data_before.items()
    }
    assert [c["spec"]["volumeName"] for c in data_after.values()] == [
        c["spec"]["volumeName"] for c in data_before.values()
    ]
    await orchestrator.until(
        lambda: set(claims(kube_api, namespace, manifests.ROOT)).isdisjoint(roots_before),
        what="the old root disk deleted",
    )
    roots = claims(kube_api, namespace, manifests.ROOT)
    assert [manifests.image_of(c) for c in roots.values()] == [new]
    vm = custom(kube_api, namespace, "virtualmachines", "db")
    assert manifests.root_of(vm) in roots
    # The step's actions, each announced once (Ready's transitions name them too).
    acted = [(r, m) for r, m in events_of(kube_api, namespace) if m.startswith("RootDiskCurrent: ")]
    reasons = [r for r, _ in acted]
    for reason in ("RootDiskCreated", "RootDiskSwitched", "Repaving"):
        assert reasons.count(reason) == 1, acted
    # A deletion looked at again before the claim shows it is announced again.
    assert "OldRootDiskDeleted" in reasons, acted
    repaving = next(m for r, m in acted if r == "Repaving")
    assert new in repaving and "PostgreSQL 16.13" in repaving


async def test_a_one_disk_instance_keeps_working_and_a_new_image_stalls(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A one-disk data claim (made from an image, as before root disks; here a retained
    one, adopted) boots as one disk; a new spec.image stalls naming the way over, and
    the VM keeps running on its disk."""
    image = f"{IMAGES_NAMESPACE}/postgres-18"
    claim: Any = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "db-data",
            "labels": {names.INSTANCE_LABEL: "db"},
            "annotations": {
                names.INSTANCE_UID_ANNOTATION: "a-deleted-instance",
                manifests.IMAGE_ANNOTATION: image,
            },
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    k8s.CoreV1Api(kube_api).create_namespaced_persistent_volume_claim(namespace, claim)
    orchestrator.apply(
        namespace, "db", SPEC, annotations={names.ADOPT_ANNOTATION: "a-deleted-instance"}
    )
    db = await ready(orchestrator, namespace)
    assert db["status"]["observed"]["image"] == image
    vm = custom(kube_api, namespace, "virtualmachines", "db")
    assert manifests.root_of(vm) is None
    assert claims(kube_api, namespace, manifests.ROOT) == {}
    vmi = custom(kube_api, namespace, "virtualmachineinstances", "db")["metadata"]["uid"]

    orchestrator.patch(namespace, "db", {"image": f"{IMAGES_NAMESPACE}/postgres-18.6"})
    stalled = ("True", "OneDiskLayout")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled True OneDiskLayout",
    )
    message = condition_message(orchestrator.get(namespace, "db"), "RootDiskCurrent")
    assert "spec.restore.from.backup" in message and image in message
    assert custom(kube_api, namespace, "virtualmachineinstances", "db")["metadata"]["uid"] == vmi
    assert claims(kube_api, namespace, manifests.ROOT) == {}

    orchestrator.patch(namespace, "db", {"image": image})
    await ready(orchestrator, namespace)
