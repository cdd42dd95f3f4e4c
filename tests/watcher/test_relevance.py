"""Which events are worth a pass, with plain data (watcher/relevance.py)."""

from __future__ import annotations

from typing import Any

import pytest

from dbi import names
from watcher.relevance import Children, Seen, child_event_matters, instance_event_matters

T1, T2 = "2026-11-30T06:00:01Z", "2026-11-30T06:00:02Z"


def instance(
    generation: int, *, deleting: bool = False, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "db", "namespace": "ns", "generation": generation}
    if deleting:
        meta["deletionTimestamp"] = T2
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta}


ADOPT = {names.ADOPT_ANNOTATION: "uid-old"}


def child(*writes: tuple[str, str]) -> dict[str, Any]:
    """A child whose managedFields hold (manager, time) entries."""
    fields = [{"manager": m, "operation": "Apply", "time": t} for m, t in writes]
    return {"metadata": {"name": "db", "namespace": "ns", "managedFields": fields}}


@pytest.mark.parametrize(
    ("event", "obj", "before", "matters"),
    [
        pytest.param("ADDED", instance(1), None, True, id="created"),
        pytest.param("SYNC", instance(1), Seen(1, False), True, id="relisted"),
        pytest.param("DELETED", instance(1), Seen(1, False), True, id="deleted"),
        pytest.param("MODIFIED", instance(2), Seen(1, False), True, id="spec-changed"),
        pytest.param("MODIFIED", instance(1), Seen(1, False), False, id="status-or-metadata-only"),
        pytest.param(
            "MODIFIED", instance(1, deleting=True), Seen(1, False), True, id="deletion-begun"
        ),
        pytest.param(
            "MODIFIED", instance(1, deleting=True), Seen(1, True), False, id="status-while-deleting"
        ),
        pytest.param("MODIFIED", instance(1), None, True, id="not-seen-before"),
        pytest.param(
            "MODIFIED", instance(1, annotations=ADOPT), Seen(1, False), True, id="dbi-decision"
        ),
        pytest.param(
            "MODIFIED",
            instance(1, annotations={**ADOPT, "team.example/owner": "payments"}),
            Seen.of(instance(1, annotations=ADOPT)),
            False,
            id="other-annotation",
        ),
    ],
)
def test_an_instance_event_matters_for_a_new_generation_or_deletion(
    event: str, obj: dict[str, Any], before: Seen | None, matters: bool
) -> None:
    assert instance_event_matters(event, obj, before) is matters


OURS, KUBEVIRT, KUBECTL = names.FIELD_MANAGER, "virt-controller", "kubectl-edit"


@pytest.mark.parametrize(
    ("event", "obj", "matters"),
    [
        pytest.param("ADDED", child((OURS, T1)), False, id="our-create"),
        pytest.param("MODIFIED", child((OURS, T2), (KUBEVIRT, T1)), False, id="our-latest-write"),
        pytest.param("MODIFIED", child((OURS, T1), (KUBEVIRT, T2)), True, id="kubevirt-status"),
        pytest.param("MODIFIED", child((OURS, T1), (KUBECTL, T2)), True, id="hand-edit"),
        pytest.param("MODIFIED", child((OURS, T2), (KUBECTL, T2)), True, id="same-second-tie"),
        pytest.param("DELETED", child((OURS, T1)), True, id="deleted-even-if-ours"),
        pytest.param("MODIFIED", child(), True, id="no-managed-fields"),
    ],
)
def test_a_child_event_matters_unless_the_newest_write_was_ours(
    event: str, obj: dict[str, Any], matters: bool
) -> None:
    assert child_event_matters(event, obj) is matters


def kubevirt(kind: str, state: str, generation: int = 1) -> dict[str, Any]:
    """A VM (printableStatus), VMI or claim (phase) someone else wrote last, in ``state``."""
    obj = child((OURS, T1), (KUBEVIRT, T2))
    obj["metadata"]["generation"] = generation
    obj["status"] = {"printableStatus" if kind == "VirtualMachine" else "phase": state}
    return obj


VM, VMI, PVC = "VirtualMachine", "VirtualMachineInstance", "PersistentVolumeClaim"


@pytest.mark.parametrize(
    ("kind", "event", "obj", "before", "matters"),
    [
        pytest.param(VMI, "ADDED", kubevirt(VMI, "Pending"), None, False, id="vmi-created"),
        pytest.param(VMI, "MODIFIED", kubevirt(VMI, "Scheduled"), 1, False, id="vmi-scheduled"),
        pytest.param(VM, "MODIFIED", kubevirt(VM, "Starting"), 1, False, id="vm-starting"),
        pytest.param(VM, "MODIFIED", kubevirt(VM, "Stopping"), 1, False, id="vm-stopping"),
        pytest.param(VMI, "MODIFIED", kubevirt(VMI, "Running"), 1, True, id="vmi-running"),
        pytest.param(VMI, "MODIFIED", kubevirt(VMI, "Failed"), 1, True, id="vmi-failed"),
        pytest.param(VM, "MODIFIED", kubevirt(VM, "Running"), 1, True, id="vm-running"),
        pytest.param(VM, "MODIFIED", kubevirt(VM, "Stopped"), 1, True, id="vm-stopped"),
        pytest.param(VM, "MODIFIED", kubevirt(VM, "CrashLoopBackOff"), 1, True, id="vm-crashing"),
        pytest.param(VMI, "DELETED", kubevirt(VMI, "Scheduled"), 1, True, id="vmi-deleted"),
        pytest.param(
            VM, "MODIFIED", kubevirt(VM, "Starting", generation=2), 1, True, id="spec-edited"
        ),
        pytest.param(PVC, "ADDED", kubevirt(PVC, ""), None, False, id="claim-created-by-cdi"),
        pytest.param(PVC, "MODIFIED", kubevirt(PVC, "Pending"), 1, False, id="claim-pending"),
        pytest.param(PVC, "MODIFIED", kubevirt(PVC, "Bound"), 1, True, id="claim-bound"),
        pytest.param(PVC, "MODIFIED", kubevirt(PVC, "Lost"), 1, True, id="claim-lost"),
        pytest.param(PVC, "DELETED", kubevirt(PVC, "Pending"), 1, True, id="pending-deleted"),
        pytest.param("Secret", "MODIFIED", kubevirt("Secret", ""), 1, True, id="other-kinds"),
    ],
)
def test_a_vm_on_its_way_wakes_no_one_until_it_gets_there(
    kind: str, event: str, obj: dict[str, Any], before: int | None, matters: bool
) -> None:
    """KubeVirt's intermediate states of a VM or VMI, and a claim's writes before it is
    bound, change no step's outcome; the state that ends the transition, a deletion, or
    a spec edit by someone else does."""
    assert child_event_matters(event, obj, kind=kind, before=before) is matters


def test_children_remember_each_childs_generation() -> None:
    """A VM's spec edited while it starts counts once; its later statuses do not."""
    children = Children()
    assert not children.event_matters(VM, "MODIFIED", kubevirt(VM, "Starting"))
    assert children.event_matters(VM, "MODIFIED", kubevirt(VM, "Starting", generation=2))
    assert not children.event_matters(VM, "MODIFIED", kubevirt(VM, "Starting", generation=2))
    assert children.event_matters(VM, "MODIFIED", kubevirt(VM, "Running", generation=2))
    assert children.event_matters(VM, "DELETED", kubevirt(VM, "Running", generation=2))
    assert children.seen == {}


def disk(which: str, state: str) -> dict[str, Any]:
    """An instance's ``root`` or ``data`` disk claim in ``state``, Kubernetes' write last."""
    obj = kubevirt(PVC, state)
    obj["metadata"]["labels"] = {names.INSTANCE_LABEL: "db", names.DISK_LABEL: which}
    return obj


ROOT, DATA = names.ROOT_DISK, names.DATA_DISK


@pytest.mark.parametrize(
    ("obj", "state_before", "matters"),
    [
        pytest.param(disk(ROOT, "Bound"), "Pending", False, id="root-disk-bound"),
        pytest.param(disk(ROOT, "Bound"), "", False, id="root-disk-bound-at-once"),
        pytest.param(disk(DATA, "Bound"), "Pending", False, id="data-disk-bound"),
        pytest.param(disk(ROOT, "Bound"), None, True, id="root-disk-not-seen-before"),
        pytest.param(disk(ROOT, "Bound"), "Bound", True, id="bound-root-disk-written"),
        pytest.param(disk(DATA, "Bound"), "Bound", True, id="bound-data-disk-written"),
        pytest.param(disk(ROOT, "Lost"), "Bound", True, id="root-disk-lost"),
        pytest.param(disk(DATA, "Lost"), "Bound", True, id="data-disk-lost"),
    ],
)
def test_a_claims_binding_wakes_no_one(
    obj: dict[str, Any], state_before: str | None, matters: bool
) -> None:
    """The VM that uses a disk cannot start before its claim is bound and its Running
    shows the binding, so a claim becoming Bound changes no outcome; any later write to
    a bound claim (its capacity after a resize, its labels, a hand edit) may, and so
    does its loss."""
    assert child_event_matters("MODIFIED", obj, kind=PVC, before=1, state_before=state_before) is (
        matters
    )


def test_children_remember_each_claims_state() -> None:
    """Created, pending, bound: a claim wakes no one until someone writes to it once
    bound (the data disk's capacity growing after a resize)."""
    for which in (ROOT, DATA):
        children = Children()
        for state in ("", "Pending", "Bound"):
            assert not children.event_matters(PVC, "MODIFIED", disk(which, state))
        assert children.event_matters(PVC, "MODIFIED", disk(which, "Bound"))
