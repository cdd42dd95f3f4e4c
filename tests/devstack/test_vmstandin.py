"""The VM stand-in plays KubeVirt on the real control plane, with real PostgreSQL guests."""

from __future__ import annotations

from typing import cast

import psycopg
import pytest

from devstack.vmstandin import faults
from tests.devstack.standin import KUBEVIRT, VMs, connect
from tests.polling import eventually

pytestmark = pytest.mark.stack


def show(address: str, setting: str) -> str:
    with connect(address) as conn:
        row = conn.execute(f"SHOW {setting}").fetchone()  # a fixed setting name of this test
    assert row is not None
    return str(row[0])


def test_a_vm_boots_postgres_that_takes_the_bootstrap_password(vms: VMs) -> None:
    """A VM with a bootstrap Secret reaches VMI Running; its address serves PostgreSQL."""
    vms.create("db")
    address = vms.running_address("db")
    assert address.startswith("127.") and address != "127.0.0.1"
    with connect(address) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("dbi_admin",)
    assert eventually(lambda: vms.printable("db") == "Running", what="printableStatus Running")
    vmi = vms.get("virtualmachineinstances", "db")
    assert vmi is not None
    conditions = {c["type"]: c["status"] for c in vmi["status"]["conditions"]}
    assert conditions == {"Ready": "True", "AgentConnected": "True"}
    assert vmi["metadata"]["labels"]["dbi.dev/instance"] == "db"
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(
            host=address,
            port=5432,
            user="dbi_admin",
            password="wrong",  # noqa: S106 (a deliberately wrong password)
            dbname="postgres",
            connect_timeout=3,
        )


def test_halting_stops_the_vm_and_starting_it_keeps_its_data(vms: VMs) -> None:
    """Halted: refused connections, no VMI, Stopped. Always again: on a new address, as
    KubeVirt's new virt-launcher pod, with the rows written before."""
    vms.create("db")
    address = vms.running_address("db")
    with connect(address) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (1), (2), (3)")

    vms.patch("db", {"spec": {"runStrategy": "Halted"}})
    eventually(lambda: vms.printable("db") == "Stopped", what="printableStatus Stopped")
    assert vms.get("virtualmachineinstances", "db") is None
    with pytest.raises(psycopg.OperationalError):
        connect(address)

    vms.patch("db", {"spec": {"runStrategy": "Always"}})
    moved = vms.running_address("db")
    assert moved != address  # a new pod, a new address (clients use the Service)
    with connect(moved) as conn:
        assert conn.execute("SELECT count(*) FROM kept").fetchone() == (3,)


def test_a_cpu_change_beyond_max_sockets_needs_a_restart(vms: VMs) -> None:
    """Sockets above maxSockets set RestartRequired; deleting the VMI restarts at the new size."""
    vms.create("db", sockets=2)
    address = vms.running_address("db")
    assert show(address, "dbi.vm_cpus") == "2"
    vms.patch("db", {"spec": {"template": {"spec": {"domain": {"cpu": {"sockets": 6}}}}}})
    eventually(lambda: vms.condition("db", "RestartRequired") == "True", what="RestartRequired")
    assert show(address, "dbi.vm_cpus") == "2"

    vms.objects.delete_namespaced_custom_object(
        *KUBEVIRT, vms.namespace, "virtualmachineinstances", "db"
    )
    eventually(
        lambda: vms.condition("db", "RestartRequired") is None, what="RestartRequired cleared"
    )
    address = vms.running_address("db")
    assert show(address, "dbi.vm_cpus") == "6"


def test_live_changes_within_the_maxima_apply_without_restart(vms: VMs) -> None:
    """Memory within maxGuest and sockets within maxSockets apply live, visible from SQL."""
    vms.create("db")
    address = vms.running_address("db")
    vmi_uid = (vms.get("virtualmachineinstances", "db") or {})["metadata"]["uid"]
    assert show(address, "effective_cache_size") == "768MB"
    domain = {"cpu": {"sockets": 3}, "memory": {"guest": "2Gi"}}
    vms.patch("db", {"spec": {"template": {"spec": {"domain": domain}}}})
    eventually(lambda: show(address, "effective_cache_size") == "1536MB", what="memory in SQL")
    assert show(address, "dbi.vm_cpus") == "3"

    def sockets() -> int | None:
        # The stand-in reloads the guest first, then writes the VMI's status.
        vmi = vms.get("virtualmachineinstances", "db") or {}
        assert vmi["metadata"]["uid"] == vmi_uid  # the same VMI: no restart
        return cast(int | None, vmi["status"].get("currentCPUTopology", {}).get("sockets"))

    eventually(lambda: sockets() == 3, what="the VMI's status showing 3 sockets")
    assert vms.condition("db", "RestartRequired") is None


def test_a_grown_pvc_request_shows_in_its_capacity(vms: VMs) -> None:
    """A PVC is bound with its request as capacity, and expands when the request grows."""
    vms.create("db", storage="1Gi")

    def capacity() -> str | None:
        claim = vms.core.read_namespaced_persistent_volume_claim("db-data", vms.namespace)
        status = claim.status
        if status is None or status.phase != "Bound":
            return None
        return (status.capacity or {}).get("storage")

    eventually(lambda: capacity() == "1Gi", what="PVC bound with 1Gi")
    vms.core.patch_namespaced_persistent_volume_claim(
        "db-data", vms.namespace, {"spec": {"resources": {"requests": {"storage": "3Gi"}}}}
    )
    eventually(lambda: capacity() == "3Gi", what="capacity 3Gi")


@pytest.mark.parametrize("strategy", ["RerunOnFailure", "Always"])
def test_a_crashed_vm_comes_back_by_itself(vms: VMs, strategy: str) -> None:
    """A crash fails the VMI; both restarting strategies boot a new one with the same
    disk, on a new address."""
    vms.create("db", strategy=strategy)
    address = vms.running_address("db")
    with connect(address) as conn:
        conn.execute("CREATE TABLE kept (n int)")
        conn.execute("INSERT INTO kept VALUES (7)")
    first = (vms.get("virtualmachineinstances", "db") or {})["metadata"]["uid"]

    faults.crash(vms.api, vms.namespace, "db")

    def restarted() -> bool:
        vmi = vms.get("virtualmachineinstances", "db") or {}
        return vmi.get("metadata", {}).get("uid") not in (None, first)

    eventually(restarted, what="a new VMI")
    moved = vms.running_address("db")
    assert moved != address  # a new pod, a new address
    with connect(moved) as conn:
        assert conn.execute("SELECT n FROM kept").fetchone() == (7,)


def test_a_vm_that_fails_to_boot_shows_it(vms: VMs) -> None:
    """A VM marked to fail its boot has a Failed VMI and is CrashLoopBackOff until fixed."""
    vms.create("db")
    vms.running_address("db")
    faults.fail_boot(vms.api, vms.namespace, "db")
    eventually(lambda: vms.printable("db") == "CrashLoopBackOff", what="CrashLoopBackOff")
    vmi = vms.get("virtualmachineinstances", "db") or {}
    assert vmi["status"]["phase"] == "Failed"
    faults.fail_boot(vms.api, vms.namespace, "db", failing=False)
    vms.running_address("db")


def test_twenty_vms_run_at_once_each_on_its_own_address(vms: VMs) -> None:
    """Twenty VMs created together all run, on twenty addresses, all reachable."""
    names = [f"db{i}" for i in range(20)]
    for name in names:
        vms.create(name)
    addresses = [vms.running_address(name, timeout=180) for name in names]
    assert len(set(addresses)) == 20
    for address in addresses:
        with connect(address) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
