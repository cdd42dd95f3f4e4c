"""The watcher's collector: instances by phase, and one Ready series per instance, from
what each instance's status shows (plain data)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from dbi.metrics import Shown, WatcherCollector


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
