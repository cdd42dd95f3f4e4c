"""The watcher's backup families on the real control plane: from the DBBackups it
watches and its instances' schedules, as Prometheus would scrape them."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from dbi import metrics, names
from tests.orchestrator import Orchestrator
from tests.polling import until
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

SPEC = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "backup": {"schedule": "@every 6h"},
}


def at(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339).timestamp()


def scraped(watcher: Watcher, namespace: str) -> dict[str, float]:
    """The watcher's series of instance ``namespace``/db, by family, as scraped."""
    registry = CollectorRegistry()
    registry.register(
        metrics.WatcherCollector(
            lambda: watcher.wakeups.counters, lambda: watcher.statuses, lambda: watcher.backups
        )
    )
    text = generate_latest(registry).decode()
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.labels == {"namespace": namespace, "name": "db"}
    }


def finished_backup(
    objects: k8s.CustomObjectsApi, namespace: str, name: str, phase: str, at: str, size: int
) -> None:
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.BACKUP_KIND,
        "metadata": {"name": name, "labels": {names.INSTANCE_LABEL: "db"}},
        "spec": {"instance": "db", "trigger": "Manual"},
    }
    objects.create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.BACKUP_PLURAL, body
    )
    status = {"status": {"phase": phase, "finishedAt": at, "sizeBytes": size}}
    objects.patch_namespaced_custom_object_status(
        names.GROUP, names.VERSION, namespace, names.BACKUP_PLURAL, name, status
    )


async def test_the_newest_backups_and_the_schedule_are_served_per_instance(
    watcher: Watcher, orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    orchestrator.apply(namespace, "db", SPEC)
    objects = k8s.CustomObjectsApi(kube_api)
    await asyncio.to_thread(
        finished_backup, objects, namespace, "db-1", "Completed", "2026-12-05T03:00:00Z", 4096
    )
    await asyncio.to_thread(
        finished_backup, objects, namespace, "db-2", "Failed", "2026-12-06T03:00:00Z", 0
    )
    wanted = {
        "dbi_backup_interval_seconds": 21600.0,
        "dbi_backup_last_completed_timestamp_seconds": at("2026-12-05T03:00:00+00:00"),
        "dbi_backup_last_completed_size_bytes": 4096.0,
        "dbi_backup_last_failed_timestamp_seconds": at("2026-12-06T03:00:00+00:00"),
    }
    await until(
        lambda: wanted.items() <= scraped(watcher, namespace).items(),
        what="the backup series",
        timeout=60,
    )
    created = scraped(watcher, namespace)["dbi_backup_scheduled_instance_created_timestamp_seconds"]
    assert created > at("2026-12-01T00:00:00+00:00")

    # A backup deleted is forgotten.
    await asyncio.to_thread(
        objects.delete_namespaced_custom_object,
        names.GROUP,
        names.VERSION,
        namespace,
        names.BACKUP_PLURAL,
        "db-2",
    )
    await until(
        lambda: "dbi_backup_last_failed_timestamp_seconds" not in scraped(watcher, namespace),
        what="the failed backup's series gone",
        timeout=60,
    )
