"""Restore tests on the real stack (``spec.backup.restoreTest``): the Schedule is made
beside the backup one; a test with no backup yet fails saying so; a test restores the
newest backup and the WAL since into a throwaway instance, which goes Ready and is
deleted after, and the instance shows RestoreTestSucceeded True; a WAL segment gone
from the store fails the next test with the gap named, as a Warning; an instance of
the throwaway's name that is not the test's is left alone."""

from __future__ import annotations

from typing import Any

import pytest

from dbi import names, restoretest
from dbi.restoretest import RestoreTestEnd, RestoreTestRequest
from devstack.stack import StackInfo
from tests.activities.backups import archive_now, backed_up, store
from tests.activities.lifecycle import SPEC, create, events_of, sql
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

BACKUP = {"schedule": "0 3 1 1 *", "restoreTest": {"schedule": "0 4 1 1 *", "timeout": "10m"}}
THROWAWAY = "db-restore-test"


async def one_test(orchestrator: Orchestrator, namespace: str, run: str) -> RestoreTestEnd:
    """One restore test of instance db, as its Schedule starts it; its result."""
    result: RestoreTestEnd = await orchestrator.client.execute_workflow(
        names.RESTORE_TEST_WORKFLOW_TYPE,
        RestoreTestRequest(namespace=namespace, name="db"),
        id=f"{names.restore_test_schedule_id(namespace, 'db')}-{run}",
        task_queue=orchestrator.task_queue,
        result_type=RestoreTestEnd,
    )
    return result


def shown(orchestrator: Orchestrator, namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The instance's status.restoreTest and its RestoreTestSucceeded condition."""
    status = orchestrator.get(namespace, "db").get("status", {})
    conditions = {c["type"]: c for c in status.get("conditions", [])}
    return status.get("restoreTest") or {}, conditions.get(restoretest.CONDITION) or {}


async def test_a_restore_test_restores_into_a_throwaway_and_says_how_it_went(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    await create(orchestrator, namespace, {**SPEC, "backup": BACKUP})
    said = orchestrator.condition(namespace, "db", "BackupScheduled")
    assert said == ("True", "BackupScheduled"), said
    schedule = orchestrator.client.get_schedule_handle(
        names.restore_test_schedule_id(namespace, "db")
    )
    described = await schedule.describe()
    assert described.schedule.state.note == "dbi: 0 4 1 1 *"

    # No backup yet: the Schedule's run fails, saying so; nothing is made.
    await schedule.trigger()

    def failed_without_backup() -> dict[str, Any] | None:
        test, condition = shown(orchestrator, namespace)
        return condition if test.get("reason") == "NoCompletedBackup" else None

    condition = await orchestrator.until(failed_without_backup, what="a test with no backup")
    assert condition["status"] == "False"
    assert "db has no Completed DBBackup to restore" in condition["message"]

    # Rows, then a backup, and a test at once: it waits for the archiver to store the
    # WAL the backup begins in (a restore right now would be refused), then passes.
    sql(kube_api, namespace, "CREATE TABLE orders AS SELECT generate_series(1, 100) AS id")
    await backed_up(orchestrator, local_stack, namespace)
    result = await one_test(orchestrator, namespace, "passes")
    assert (result.succeeded, result.reason, result.instance) == (True, "Restored", THROWAWAY)
    test, condition = await orchestrator.until(
        lambda: (found := shown(orchestrator, namespace))[1].get("status") == "True" and found,
        what="RestoreTestSucceeded True",
    )
    assert test["instance"] == THROWAWAY and test["succeeded"] is True
    assert f"restored into {THROWAWAY}" in condition["message"]
    await orchestrator.until(lambda: gone(orchestrator, namespace), what="the throwaway gone")

    # A segment the restore needs, gone from the store (one between the backup's and the
    # last): the next test fails naming it, its throwaway goes all the same, and the
    # instance says so in a Warning.
    await archive_now(orchestrator, namespace, kube_api)
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    keys = store().keys(f"{namespace}/db/_wal/{uid}/")
    segments = sorted(k for k in keys if k.endswith(".gz") and len(k.rsplit("/", 1)[1]) == 27)
    assert store().delete(segments[-2]) == 1
    missing = segments[-2].rsplit("/", 1)[1].removesuffix(".gz")
    result = await one_test(orchestrator, namespace, "gap")
    assert (result.succeeded, result.reason) == (False, "RestoreFailed"), result
    assert f"WAL segment {missing}" in result.message, result.message
    test, condition = await orchestrator.until(
        lambda: (found := shown(orchestrator, namespace))[1].get("status") == "False" and found,
        what="RestoreTestSucceeded False",
    )
    assert missing in condition["message"]
    warned = [m for r, m in events_of(kube_api, namespace) if r == "RestoreFailed"]
    assert warned and missing in warned[-1], events_of(kube_api, namespace)
    await orchestrator.until(lambda: gone(orchestrator, namespace), what="the throwaway gone")

    # An instance of that name that is not the test's: left alone, and the test says why.
    orchestrator.apply(namespace, THROWAWAY, {**SPEC, "powerState": "Stopped"})
    result = await one_test(orchestrator, namespace, "taken")
    assert (result.succeeded, result.reason) == (False, "NameTaken"), result
    assert f"DBInstance {THROWAWAY} is there and is not db's restore test" in result.message
    kept = orchestrator.get(namespace, THROWAWAY)
    assert "deletionTimestamp" not in kept["metadata"]
    await orchestrator.delete(namespace, THROWAWAY)


def gone(orchestrator: Orchestrator, namespace: str) -> bool:
    listed = orchestrator.kubectl("get", "dbinstance", "-n", namespace, "-o", "name").stdout
    return f"/{THROWAWAY}" not in listed
