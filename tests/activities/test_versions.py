"""PostgreSQL versions on the local stack: a VM boots the build its image names (the
dev images' ``dbi.dev/postgresql-version`` label); the health step publishes the running
version and stalls, naming both, when its major is not ``spec.version``."""

from __future__ import annotations

from typing import Any

import pytest

from devstack import postgresql
from tests.activities.test_lifecycle import SPEC, create
from tests.orchestrator import IMAGES_NAMESPACE, Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


async def test_an_instance_runs_the_version_its_image_names(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    db = await create(orchestrator, namespace, {**SPEC, "version": 16})
    running = postgresql.BY_MAJOR[16].rsplit(".", 1)[0]  # 16.15.0 reports 16.15
    assert db["status"]["observed"]["postgresVersion"] == running


async def test_an_image_of_another_major_is_reported_not_run_as_asked(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    spec: dict[str, Any] = {**SPEC, "version": 17, "image": f"{IMAGES_NAMESPACE}/postgres-16"}
    orchestrator.apply(namespace, "db", spec)
    stalled = ("True", "VersionMismatch")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled True VersionMismatch",
    )
    status = orchestrator.get(namespace, "db")["status"]
    healthy = next(c for c in status["conditions"] if c["type"] == "DatabaseHealthy")
    assert "PostgreSQL 16.15 runs, but spec.version is 17" in healthy["message"]
    assert status["observed"]["postgresVersion"] == "16.15"
