"""Which events wake a DBDatabase's or DBRole's workflow (watcher.objects), with plain
data."""

from __future__ import annotations

from typing import Any

from watcher.objects import ObjectWakes


def database(generation: int = 1, *, deleting: bool = False, status: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {
        "namespace": "t",
        "name": "orders",
        "uid": "u",
        "generation": generation,
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    return {"metadata": meta, "spec": {"instance": "db"}, "status": {"note": status}}


def instance(ready: str) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready}]
    return {"metadata": {"namespace": "t", "name": "db"}, "status": {"conditions": conditions}}


def test_a_database_wakes_on_spec_and_deletion_not_on_its_status() -> None:
    wakes = ObjectWakes(client=None)  # type: ignore[arg-type]
    key = ("DBDatabase", "t", "orders")
    assert wakes.object_event("DBDatabase", "ADDED", database()) == [key]
    assert wakes.object_event("DBDatabase", "MODIFIED", database(status="written")) == []
    assert wakes.object_event("DBDatabase", "MODIFIED", database(2)) == [key]
    assert wakes.object_event("DBDatabase", "MODIFIED", database(2, deleting=True)) == [key]
    assert wakes.object_event("DBDatabase", "SYNC", database(2, deleting=True)) == [key]
    assert wakes.object_event("DBDatabase", "DELETED", database(2, deleting=True)) == []


def test_an_instance_wakes_its_databases_when_it_comes_goes_or_turns_ready() -> None:
    wakes = ObjectWakes(client=None)  # type: ignore[arg-type]
    wakes.object_event("DBDatabase", "ADDED", database())
    key = ("DBDatabase", "t", "orders")
    assert wakes.instance_event("ADDED", instance("False")) == [key]
    assert wakes.instance_event("MODIFIED", instance("False")) == []
    assert wakes.instance_event("MODIFIED", instance("True")) == [key]
    assert wakes.instance_event("DELETED", instance("True")) == [key]


def test_a_roles_secret_deleted_wakes_the_role() -> None:
    wakes = ObjectWakes(client=None)  # type: ignore[arg-type]
    role = {"metadata": {"namespace": "t", "name": "alice", "uid": "u"}, "spec": {"instance": "db"}}
    wakes.object_event("DBRole", "ADDED", role)
    labels = {"dbi.dev/role": "alice", "dbi.dev/instance": "db"}
    secret = {"metadata": {"namespace": "t", "name": "alice-credentials", "labels": labels}}
    assert wakes.child_event("Secret", "DELETED", secret) == [("DBRole", "t", "alice")]
    assert wakes.child_event("Secret", "MODIFIED", secret) == []
    other = {"metadata": {"namespace": "t", "name": "db-credentials", "labels": {}}}
    assert wakes.child_event("Secret", "DELETED", other) == []
