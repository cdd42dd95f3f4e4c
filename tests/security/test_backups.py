"""A tenant's backups are the instance's they were taken of: retention counts by the
instance's UID (what dbi wrote in the DBBackup's status), never by a name another
instance may take."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode

from dbi import names
from dbi.backups import BackupResult
from tests.security.tenancy import Tenancy, instance

pytestmark = pytest.mark.stack

BACKUP = {"schedule": "0 3 1 1 *", "retention": {"count": 2}, "onDelete": True}


def completed(
    tenancy: Tenancy, namespace: str, count: int, instance: str = "db"
) -> dict[str, dict[str, Any]]:
    """Wait until ``count`` DBBackups of ``instance`` are Completed; return them all."""

    def done() -> dict[str, dict[str, Any]] | None:
        found = {
            n: b for n, b in tenancy.backups(namespace).items() if b["spec"]["instance"] == instance
        }
        phases = [b.get("status", {}).get("phase") for b in found.values()]
        return found if phases.count("Completed") >= count else None

    try:
        return dict(tenancy.until(done, what=f"{count} backups Completed", timeout=180))
    except AssertionError:
        raise AssertionError(tenancy.backups(namespace)) from None


async def requested(
    tenancy: Tenancy, temporal_client: Client, namespace: str, request: str
) -> BackupResult:
    """Ask for a backup of `db` as a tenant does (the annotation); its workflow's result."""
    annotation = f"{names.BACKUP_REQUESTED_AT}={request}"
    tenancy.tenant("annotate", "--overwrite", "dbinstance", "db", "-n", namespace, annotation)
    handle: WorkflowHandle[Any, BackupResult] = temporal_client.get_workflow_handle(
        names.requested_backup_id(namespace, "db", request), result_type=BackupResult
    )

    async def ended() -> BackupResult:
        while True:  # the backup step starts the workflow on its next pass
            try:
                return await handle.result()
            except RPCError as e:
                if e.status != RPCStatusCode.NOT_FOUND:
                    raise
            await asyncio.sleep(0.3)

    found: BackupResult = await tenancy.until_async(ended, what=f"the backup {request} to end")
    return found


def files(backup: dict[str, Any]) -> Path:
    """Where a DBBackup's files are (the suite's store is a directory)."""
    return Path(backup["status"]["location"].removeprefix("file://"))


async def test_a_new_instance_of_a_deleted_ones_name_prunes_only_its_own_backups(
    tenancy: Tenancy, temporal_client: Client
) -> None:
    """`db` keeps two backups; deleted, it leaves its manual backup and its final one. A
    new `db`, restored from the final backup and keeping two as well, takes three: the
    third prunes its first, and nothing of the old `db`'s goes, files included."""
    ns = tenancy.mallory
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=instance("db", backup=BACKUP))
    tenancy.ready(ns, "db")
    assert (await requested(tenancy, temporal_client, ns, "old")).phase == "Completed"
    tenancy.tenant("delete", "dbinstance", "db", "-n", ns, "--timeout=180s")
    old = completed(tenancy, ns, 2)
    final = next(n for n, b in old.items() if b["spec"]["trigger"] == "Delete")

    restore = {"from": {"backup": final}}
    tenancy.tenant(
        "apply", "-n", ns, "-f", "-", stdin=instance("db", backup=BACKUP, restore=restore)
    )
    tenancy.ready(ns, "db")
    taken = [await requested(tenancy, temporal_client, ns, f"new-{n}") for n in (1, 2, 3)]
    assert [t.phase for t in taken] == ["Completed"] * 3
    assert [t.pruned for t in taken] == [[], [], [taken[0].backup]]

    left = tenancy.backups(ns)
    assert set(old) <= set(left), "an old instance's backup was pruned"
    for name in old:
        assert files(left[name]).is_dir(), f"the files of {name} are gone"


async def test_a_backup_deleted_by_hand_takes_its_files_with_it(
    tenancy: Tenancy, temporal_client: Client
) -> None:
    """Mallory deletes a DBBackup with kubectl: it stays (dbi's finalizer) until the
    reaper (its Schedule, triggered here rather than waited a minute for) deleted its
    files from the store; then it goes. No file of it is left behind."""
    ns = tenancy.mallory
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=instance("kept", backup=BACKUP))
    tenancy.ready(ns, "kept")
    annotation = f"{names.BACKUP_REQUESTED_AT}=to-delete"
    tenancy.tenant("annotate", "dbinstance", "kept", "-n", ns, annotation)
    [(name, backup)] = completed(tenancy, ns, 1, "kept").items()
    assert names.BACKUP_FINALIZER in backup["metadata"]["finalizers"]
    where = files(backup)
    assert where.is_dir()

    tenancy.tenant("delete", "dbbackup", name, "-n", ns, "--wait=false")
    reaper = temporal_client.get_schedule_handle(names.reaper_schedule_id(tenancy.installed.queue))
    await reaper.trigger()
    tenancy.until(lambda: name not in tenancy.backups(ns), what="the DBBackup gone")
    assert not where.exists(), "its files were left in the store"
