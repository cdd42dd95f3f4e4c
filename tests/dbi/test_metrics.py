"""The watcher's collector: instances by phase, one Ready series per instance, and each
instance's backups, from what its objects show (plain data)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from dbi.metrics import Backups, LastBackups, Shown, WatcherCollector


class Counters:
    events_seen = events_ignored = signals_sent = coalesced = send_failures = 0


def ready(status: str) -> dict[str, object]:
    return {"phase": "Running", "conditions": [{"type": "Ready", "status": status}]}


def test_each_instance_has_one_ready_series_and_the_phases_are_counted() -> None:
    statuses = {
        ("team-a", "orders"): Shown.of(ready("True")),
        ("team-a", "carts"): Shown.of(ready("False")),
        ("team-b", "orders"): Shown.of({"phase": "Provisioning"}),
        ("team-b", "new"): Shown.of({}),
    }
    registry = CollectorRegistry()
    registry.register(WatcherCollector(Counters, lambda: statuses))
    lines = set(generate_latest(registry).decode().splitlines())
    assert 'dbi_instance_ready{name="orders",namespace="team-a"} 1.0' in lines
    assert 'dbi_instance_ready{name="carts",namespace="team-a"} 0.0' in lines
    assert 'dbi_instance_ready{name="orders",namespace="team-b"} 0.0' in lines
    assert 'dbi_instance_ready{name="new",namespace="team-b"} 0.0' in lines
    assert 'dbi_instances{phase="Running"} 2.0' in lines
    assert 'dbi_instances{phase="Unknown"} 1.0' in lines
    assert len([line for line in lines if line.startswith("dbi_instance_ready{")]) == 4


SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}


def backup(
    name: str, instance: str | None, phase: str, finished: str | None, size: int = 0
) -> dict[str, Any]:
    labels = {"dbi.dev/instance": instance} if instance else {}
    status = {"phase": phase, "sizeBytes": size, **({"finishedAt": finished} if finished else {})}
    return {"metadata": {"namespace": "team-a", "name": name, "labels": labels}, "status": status}


def test_each_instance_shows_its_newest_completed_and_failed_backup() -> None:
    seen = Backups()
    seen.note("ADDED", backup("a", "orders", "Completed", "2026-12-05T03:00:00Z", 100))
    seen.note("ADDED", backup("b", "orders", "Completed", "2026-12-06T03:00:00Z", 200))
    seen.note("ADDED", backup("c", "orders", "Failed", "2026-12-06T04:00:00Z"))
    seen.note("ADDED", backup("d", "orders", "Running", None))
    seen.note("ADDED", backup("e", None, "Completed", "2026-12-07T03:00:00Z", 1))  # no label
    seen.note("ADDED", backup("f", "carts", "Failed", "2026-12-06T05:00:00Z"))
    seen.note("ADDED", backup("g", "carts", "Completed", "2026-12-07T05:00:00Z", 5))
    seen.note("DELETED", backup("g", "carts", "Completed", "2026-12-07T05:00:00Z", 5))
    last = seen.last()
    day = datetime(2026, 12, 6, 3, tzinfo=UTC).timestamp()
    assert last[("team-a", "orders")] == LastBackups(completed=day, size=200, failed=day + 3600)
    assert last[("team-a", "carts")] == LastBackups(failed=day + 7200)
    assert set(last) == {("team-a", "orders"), ("team-a", "carts")}


def test_a_scheduled_instance_shows_its_interval_and_a_suspended_one_none() -> None:
    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    created = {"creationTimestamp": "2026-12-01T00:00:00Z"}
    daily = {"metadata": created, "spec": {**SPEC, "backup": {"schedule": "@daily"}}}
    shown = Shown.of_instance(daily, now)
    assert shown.backup_interval == 86400
    assert shown.created == datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    paused = {
        "metadata": created,
        "spec": {**SPEC, "backup": {"schedule": "@daily", "suspended": True}},
    }
    assert Shown.of_instance(paused, now).backup_interval is None
    assert Shown.of_instance({"metadata": created, "spec": SPEC}, now).backup_interval is None
    unreadable = {"metadata": created, "spec": {"backup": {"schedule": "@daily"}}}
    assert Shown.of_instance(unreadable, now).backup_interval is None


def test_the_backup_families_have_one_series_per_instance_seen() -> None:
    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    spec = {**SPEC, "backup": {"schedule": "0 3 * * *"}}
    meta = {"creationTimestamp": "2026-12-01T00:00:00Z"}
    statuses = {
        ("team-a", "orders"): Shown.of_instance({"metadata": meta, "spec": spec}, now),
        ("team-a", "carts"): Shown.of_instance({"metadata": meta, "spec": SPEC}, now),
    }
    seen = Backups()
    seen.note("ADDED", backup("a", "orders", "Completed", "2026-12-06T03:00:00Z", 200))
    seen.note("ADDED", backup("b", "gone", "Completed", "2026-12-06T03:00:00Z", 200))
    registry = CollectorRegistry()
    registry.register(WatcherCollector(Counters, lambda: statuses, lambda: seen))
    lines = set(generate_latest(registry).decode().splitlines())
    at = datetime(2026, 12, 6, 3, tzinfo=UTC).timestamp()
    key = '{name="orders",namespace="team-a"}'
    assert f"dbi_backup_interval_seconds{key} 86400.0" in lines
    assert f"dbi_backup_last_completed_timestamp_seconds{key} 1.796526e+09" in lines
    assert at == 1.796526e09
    assert f"dbi_backup_last_completed_size_bytes{key} 200.0" in lines
    # An instance without a schedule has no interval; backups of one not seen, no series.
    assert not [line for line in lines if 'name="carts"' in line and "backup" in line]
    assert not [line for line in lines if 'name="gone"' in line]


def test_a_running_archived_instance_shows_when_its_wal_was_last_stored_and_checked() -> None:
    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    archive = {
        "lastArchivedAt": "2026-12-06T11:58:00Z",
        "checkedAt": "2026-12-06T11:59:00Z",
        "lagBytes": 33554432,
    }
    backup = {"schedule": "@daily", "suspended": True}  # archiving goes on while suspended
    obj = {"spec": {**SPEC, "backup": backup}, "status": {"archive": archive}}
    registry = CollectorRegistry()
    statuses = {("team-a", "orders"): Shown.of_instance(obj, now)}
    # Stopped as asked, or without spec.backup, nothing is archived: no series to go stale.
    for name, spec in (
        ("stopped", {**SPEC, "backup": backup, "powerState": "Stopped"}),
        ("unarchived", SPEC),
    ):
        statuses[("team-a", name)] = Shown.of_instance({**obj, "spec": spec}, now)
    registry.register(WatcherCollector(Counters, lambda: statuses, Backups))
    lines = set(generate_latest(registry).decode().splitlines())
    key = '{name="orders",namespace="team-a"}'
    checked = datetime(2026, 12, 6, 11, 59, tzinfo=UTC).timestamp()
    assert checked == 1.79655834e09  # as the exposition writes it: 1.79655834e+09
    assert f"dbi_wal_archive_checked_timestamp_seconds{key} 1.79655834e+09" in lines
    assert f"dbi_wal_last_archived_timestamp_seconds{key} 1.79655828e+09" in lines
    assert f"dbi_wal_archive_lag_bytes{key} 3.3554432e+07" in lines
    assert not [
        line for line in lines if "dbi_wal" in line and "orders" not in line and "{" in line
    ]


def test_the_last_restore_test_shows_while_restore_tests_are_asked() -> None:
    now = datetime(2026, 12, 6, 12, tzinfo=UTC)
    tested = {
        "succeeded": False,
        "reason": "RestoreFailed",
        "startedAt": "2026-12-06T03:00:00Z",
        "finishedAt": "2026-12-06T03:10:00Z",
    }
    asked = {"schedule": "@daily", "restoreTest": {}}
    statuses = {
        ("team-a", "orders"): Shown.of_instance(
            {"spec": {**SPEC, "backup": asked}, "status": {"restoreTest": tested}}, now
        ),
        # Restore tests turned off: the last one's result no longer stands for anything.
        ("team-a", "carts"): Shown.of_instance(
            {"spec": {**SPEC, "backup": {"schedule": "@daily"}}, "status": {"restoreTest": tested}},
            now,
        ),
        ("team-a", "fresh"): Shown.of_instance({"spec": {**SPEC, "backup": asked}}, now),
    }
    registry = CollectorRegistry()
    registry.register(WatcherCollector(Counters, lambda: statuses, Backups))
    lines = set(generate_latest(registry).decode().splitlines())
    key = '{name="orders",namespace="team-a"}'
    assert f"dbi_restore_test_succeeded{key} 0.0" in lines
    assert datetime(2026, 12, 6, 3, 10, tzinfo=UTC).timestamp() == 1.7965266e09
    assert f"dbi_restore_test_last_timestamp_seconds{key} 1.7965266e+09" in lines
    assert not [
        line
        for line in lines
        if "dbi_restore_test" in line and "orders" not in line and "{" in line
    ]
    statuses["team-a", "orders"] = Shown.of_instance(
        {
            "spec": {**SPEC, "backup": asked},
            "status": {"restoreTest": {**tested, "succeeded": True, "reason": "Restored"}},
        },
        now,
    )
    lines = set(generate_latest(registry).decode().splitlines())
    assert f"dbi_restore_test_succeeded{key} 1.0" in lines
