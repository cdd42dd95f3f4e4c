"""The stand-in's storage on the real control plane: volumes provisioned, bound and
reclaimed as their reclaimPolicy says, as Kubernetes does."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client as k8s

from devstack.stack import StackInfo
from tests.devstack.standin import VMs, connect
from tests.polling import eventually

pytestmark = pytest.mark.stack


def volume_of(vms: VMs, claim: str) -> str:
    """Wait until ``claim`` is Bound, and return its volume's name."""

    def bound() -> str | None:
        found = vms.core.read_namespaced_persistent_volume_claim(claim, vms.namespace)
        ok = found.status is not None and found.status.phase == "Bound"
        return found.spec.volume_name if ok and found.spec else None

    return str(eventually(bound, what=f"{claim} bound"))


def phase(vms: VMs, volume: str) -> str | None:
    try:
        found = vms.core.read_persistent_volume(volume)
    except k8s.ApiException as e:
        if e.status == 404:
            return "gone"
        raise
    return found.status.phase if found.status else None


def disk(local_stack: StackInfo, volume: str) -> Path:
    return Path(local_stack.state_dir) / "vms" / "disks" / volume


def test_a_claim_gets_a_volume_of_its_own_bound_both_ways(vms: VMs) -> None:
    """A claim is provisioned a volume with the class's reclaim policy, bound both ways."""
    vms.create("db")
    name = volume_of(vms, "db-data")
    volume = vms.core.read_persistent_volume(name)
    assert volume.spec is not None and volume.spec.claim_ref is not None
    assert (volume.spec.claim_ref.namespace, volume.spec.claim_ref.name) == (
        vms.namespace,
        "db-data",
    )
    assert volume.spec.persistent_volume_reclaim_policy == "Delete"
    assert eventually(lambda: phase(vms, name) == "Bound", what="Bound")


def test_a_deleted_claim_takes_a_delete_volume_and_its_disk(
    vms: VMs, local_stack: StackInfo
) -> None:
    """reclaimPolicy Delete: the claim's deletion deletes the volume and its disk."""
    vms.create("db")
    vms.running_address("db")
    name = volume_of(vms, "db-data")
    assert disk(local_stack, name).exists()
    vms.objects.delete_namespaced_custom_object(
        "kubevirt.io", "v1", vms.namespace, "virtualmachines", "db"
    )
    vms.core.delete_namespaced_persistent_volume_claim("db-data", vms.namespace)
    eventually(lambda: phase(vms, name) == "gone", what="the volume deleted")
    eventually(lambda: not disk(local_stack, name).exists(), what="the disk removed")


def test_a_retained_volume_outlives_its_claim_and_serves_a_new_one(
    vms: VMs, local_stack: StackInfo
) -> None:
    """reclaimPolicy Retain: the claim's deletion leaves the volume Released with its
    data; freed (claimRef cleared), it binds a new claim, and a VM on it has the rows."""
    vms.create("db")
    address = vms.running_address("db")
    with connect(address) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    name = volume_of(vms, "db-data")
    vms.core.patch_persistent_volume(name, {"spec": {"persistentVolumeReclaimPolicy": "Retain"}})
    vms.objects.delete_namespaced_custom_object(
        "kubevirt.io", "v1", vms.namespace, "virtualmachines", "db"
    )
    vms.core.delete_namespaced_persistent_volume_claim("db-data", vms.namespace)
    eventually(lambda: phase(vms, name) == "Released", what="the volume Released")
    assert disk(local_stack, name).exists()

    vms.core.patch_persistent_volume(
        name,
        [{"op": "remove", "path": "/spec/claimRef"}],  # what an operator does to reuse it
    )
    eventually(lambda: phase(vms, name) == "Available", what="the volume Available")
    vms.create("again", volume=name)
    assert volume_of(vms, "again-data") == name
    with connect(vms.running_address("again")) as conn:
        assert conn.execute("SELECT n FROM kept").fetchone() == (42,)
    vms.core.delete_persistent_volume(name)  # a retained volume is the operator's to delete
