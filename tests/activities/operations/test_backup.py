"""Backups on the real stack: `dbi backup` takes a physical backup that really restores,
the schedule takes them and retention prunes them, and a worker lost mid-backup leaves
a backup that is whole or none."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from kubernetes import client as k8s
from temporalio.client import ScheduleDescription
from temporalio.service import RPCError, RPCStatusCode

from activities.infra import backupstore
from activities.infra.admin_credential import name_for
from activities.infra.backupstore import S3Store
from dbi import backups, bootstrap, names, pipeline
from dbi.backups import BackupPhase, BackupRequest, BackupResult, StoreLocation, Trigger
from dbi.config import Config
from devstack.stack import StackInfo
from tests.activities.backups import admin, archive_now, backed_up, dbbackups, store
from tests.activities.crashing import heartbeating, worker
from tests.activities.lifecycle import SPEC, create, custom, events_of, ready, sql, uri
from tests.activities.logins import admin_credential, secret
from tests.backupcheck import restored
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator
from tests.stack import S3_BUCKET
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


async def test_dbi_backup_takes_a_backup_that_restores_the_rows_it_held(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """`dbi backup` records a Completed DBBackup whose files restore the rows written
    before it, and not those written after."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1, 1000)")
    result = await backed_up(orchestrator, local_stack, namespace)
    assert result["phase"] == "Completed"
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1001, 1010)")

    [item] = dbbackups(kube_api, namespace)
    assert item["metadata"]["name"] == result["backup"]
    status = item["status"]
    assert status["phase"] == "Completed"
    assert item["spec"] == {"instance": "db", "trigger": "Manual"}
    assert status["postgresVersion"].startswith("18.")
    assert status["sizeBytes"] > 0 and status["wal"]["timeline"] == 1
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
    prefix = backups.store_prefix(namespace, "db", result["backup"])
    assert store().keys(prefix) == [
        prefix + f
        for f in ("1/backup_manifest", "1/base.tar.gz", "1/pg_wal.tar.gz", "dbi-backup.json")
    ]
    with (
        restored(store(), prefix) as conninfo,
        psycopg.connect(conninfo.replace("dbname=postgres", "dbname=app")) as conn,
    ):
        assert conn.execute("SELECT count(*), max(id) FROM orders").fetchone() == (1000, 1000)

    assert any(
        reason == "BackupCompleted" and message.startswith(result["backup"])
        for reason, message in events_of(kube_api, namespace)
    )
    # The backup connected as dbi's admin: its password is nowhere in the workflow.
    password = admin_credential(kube_api, orchestrator, namespace)["password"]
    history = await orchestrator.client.get_workflow_handle(status["workflowId"]).fetch_history()
    assert len(password) >= 16 and password not in history.to_json()

    listed = await asyncio.to_thread(dbi, local_stack, "backups", "db", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    assert result["backup"] in listed.stdout and "Completed" in listed.stdout
    assert listed.stdout.splitlines()[-1] == (
        f"recoverable: the end of its one completed backup, {status['finishedAt']}"
    )
    # Every instance's, of every namespace: which instance, and where; JSON as status's.
    everywhere = await asyncio.to_thread(dbi, local_stack, "backups", "-A", "-o", "json")
    assert everywhere.returncode == 0, everywhere.stderr
    found = [
        (i["metadata"]["namespace"], i["metadata"]["name"])
        for i in json.loads(everywhere.stdout)["items"]
    ]
    assert (namespace, result["backup"]) in found
    table = await asyncio.to_thread(dbi, local_stack, "backups", "-A")
    assert table.stdout.split()[:3] == ["NAMESPACE", "INSTANCE", "NAME"]
    assert [namespace, "db", result["backup"]] in [
        line.split()[:3] for line in table.stdout.splitlines()
    ]


def phases(kube_api: Any, namespace: str) -> dict[str, str | None]:
    return {
        i["metadata"]["name"]: i.get("status", {}).get("phase")
        for i in dbbackups(kube_api, namespace)
    }


async def schedule_of(orchestrator: Orchestrator, namespace: str) -> ScheduleDescription | None:
    handle = orchestrator.client.get_schedule_handle(names.schedule_id(namespace, "db"))
    try:
        return await handle.describe()
    except RPCError as e:
        if e.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


async def test_a_schedule_takes_backups_and_retention_keeps_the_newest(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """spec.backup makes a Temporal Schedule whose backups complete; retention deletes
    the oldest (object and files) and keeps count; the minutely WAL archiver stores the
    segments the backups complete; suspended pauses it; unset deletes it."""
    backup = {"schedule": "@every 5s", "retention": {"count": 2}}
    await create(orchestrator, namespace, {**SPEC, "backup": backup})
    assert orchestrator.condition(namespace, "db", "BackupScheduled") == ("True", "BackupScheduled")
    seen: set[str] = set()

    def pruned() -> bool:
        now = phases(kube_api, namespace)
        seen.update(now)
        completed = [name for name, phase in now.items() if phase == "Completed"]
        return len(seen - set(now)) >= 2 and len(completed) <= 2

    await orchestrator.until(pruned, timeout=180, what="two backups pruned by retention")
    kept = phases(kube_api, namespace)
    for name in seen:
        files = store().keys(backups.store_prefix(namespace, "db", name))
        if name not in kept:
            assert files == [], f"{name} was pruned but its files stay"
        elif kept[name] == "Completed":
            assert any(f.endswith(backupstore.MANIFEST) for f in files)
    # Each backup completes a WAL segment; once the archiver's first visit leased the
    # guest's spool, its next visit stores them (workflows.walarchiver, once a minute).
    wal = f"{namespace}/db/_wal/"
    archived = await orchestrator.until(
        lambda: store().keys(wal), timeout=200, what="WAL stored by the minutely archiver"
    )
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    assert all(key.startswith(f"{wal}{uid}/") and key.endswith(".gz") for key in archived)

    orchestrator.patch(namespace, "db", {"backup": {**backup, "suspended": True}})
    await ready(orchestrator, namespace)
    described = await schedule_of(orchestrator, namespace)
    assert described is not None and described.schedule.state.paused

    orchestrator.patch(namespace, "db", {"backup": None})
    await ready(orchestrator, namespace)
    assert await schedule_of(orchestrator, namespace) is None
    assert orchestrator.condition(namespace, "db", "BackupScheduled") == ("True", "NotRequested")


async def test_deleting_an_instance_deletes_its_schedule_and_keeps_its_backups(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """The teardown deletes the schedule first; the DBBackups and their files stay."""
    backup = {"schedule": "@every 5s"}
    await create(orchestrator, namespace, {**SPEC, "backup": backup})
    await orchestrator.until(
        lambda: "Completed" in phases(kube_api, namespace).values(), what="a scheduled backup"
    )
    await orchestrator.delete(namespace, "db")
    assert await schedule_of(orchestrator, namespace) is None
    completed = [n for n, p in phases(kube_api, namespace).items() if p == "Completed"]
    assert completed
    for name in completed:
        files = store().keys(backups.store_prefix(namespace, "db", name))
        assert any(f.endswith(backupstore.MANIFEST) for f in files)


async def test_a_worker_killed_mid_backup_leaves_a_whole_backup(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
    tmp_path: Path,
) -> None:
    """A worker killed while pg_basebackup runs: another worker takes the backup again
    from the start, and the DBBackup ends Completed with files that restore."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1, 100)")
    queue = f"backup-crash-{uuid.uuid4().hex[:8]}"
    slow = worker(local_stack, queue, tmp_path / "slow.log", DBI_BACKUP_MAX_RATE="1M")
    workflow_id = f"{names.backup_workflow_id(namespace, 'db')}-crash"
    handle = await orchestrator.client.start_workflow(
        names.BACKUP_WORKFLOW_TYPE,
        BackupRequest(namespace=namespace, name="db", trigger=Trigger.MANUAL),
        id=workflow_id,
        task_queue=queue,
        result_type=BackupResult,
    )
    try:
        await asyncio.wait_for(
            heartbeating(orchestrator.client, workflow_id, pipeline.TAKE_BACKUP), 60
        )
        slow.send_signal(signal.SIGKILL)
        slow.wait(10)
        assert "Running" in phases(kube_api, namespace).values()
        other = worker(local_stack, queue, tmp_path / "other.log")
        try:
            result = await asyncio.wait_for(handle.result(), 180)
        finally:
            other.terminate()
            other.wait(60)
    finally:
        if slow.poll() is None:
            slow.kill()
    assert result.phase is BackupPhase.COMPLETED, result
    attempts = [
        e.activity_task_started_event_attributes.attempt
        async for e in handle.fetch_history_events()
        if e.HasField("activity_task_started_event_attributes")
    ]
    assert max(attempts) >= 2, "the killed attempt was not retried"
    assert phases(kube_api, namespace) == {result.backup: "Completed"}
    prefix = backups.store_prefix(namespace, "db", result.backup or "")
    with (
        restored(store(), prefix) as conninfo,
        psycopg.connect(conninfo.replace("dbname=postgres", "dbname=app")) as conn,
    ):
        assert conn.execute("SELECT count(*) FROM orders").fetchone() == (100,)


async def test_an_instance_restored_from_a_backup_holds_the_rows_it_held(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """spec.restore.from.backup: the new instance becomes Ready with the rows written
    before the backup, not those after, and its own credentials work (admin and app)."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1, 100)")
    backup = (await backed_up(orchestrator, local_stack, namespace))["backup"]
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(101, 110)")

    orchestrator.apply(namespace, "copy", {**SPEC, "restore": {"from": {"backup": backup}}})
    restored_db = await ready(orchestrator, namespace, "copy")
    assert restored_db["status"]["observed"]["postgresVersion"].startswith("18.")
    with psycopg.connect(uri(kube_api, namespace, "copy"), connect_timeout=3) as conn:
        assert conn.execute("SELECT count(*), max(id) FROM orders").fetchone() == (100, 100)
    source = admin_credential(kube_api, orchestrator, namespace)["password"]
    copy_uid = orchestrator.get(namespace, "copy")["metadata"]["uid"]
    assert source != secret(kube_api, Config().namespace, name_for(copy_uid))["password"]

    def boot_data_names_no_backup() -> bool:
        userdata = secret(kube_api, namespace, "copy-cloudinit")["userdata"]
        return bootstrap.from_userdata(userdata).restore is None

    # Once started from it, the tenant-readable boot data no longer says where the
    # backup is (a presigned URL of an S3 store reads it for days).
    await orchestrator.until(boot_data_names_no_backup, what="the restore cleared")


async def test_a_restore_from_a_backup_that_is_not_there_stalls_naming_the_field(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """No VM is made for a restore whose backup is missing: Stalled, naming the field."""
    orchestrator.apply(namespace, "copy", {**SPEC, "restore": {"from": {"backup": "nope"}}})
    stalled = ("True", "RestoreSourceInvalid")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "copy", "Stalled") == stalled,
        what="Stalled RestoreSourceInvalid",
    )
    status = orchestrator.get(namespace, "copy")["status"]
    said = next(c for c in status["conditions"] if c["type"] == "CredentialsReady")["message"]
    assert said.startswith("spec.restore.from.backup: there is no DBBackup nope")
    assert custom(kube_api, namespace, "virtualmachines", "copy") == {}


async def test_a_deleted_instance_gets_its_final_backup_before_its_disks_go(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """spec.backup.onDelete: the teardown takes a final backup (trigger Delete), then
    deletes the VM and disks; the backup stays, with its files."""
    backup = {"schedule": "0 3 * * *", "onDelete": True}
    await create(orchestrator, namespace, {**SPEC, "backup": backup})
    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    await orchestrator.delete(namespace, "db", timeout=180)
    [item] = dbbackups(kube_api, namespace)
    assert (item["spec"]["trigger"], item["status"]["phase"]) == ("Delete", "Completed")
    files = store().keys(backups.store_prefix(namespace, "db", item["metadata"]["name"]))
    assert any(f.endswith(backupstore.MANIFEST) for f in files)
    assert custom(kube_api, namespace, "virtualmachines", "db") == {}


async def test_a_final_backup_that_fails_holds_the_deletion_until_told(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A stopped instance's final backup fails: the deletion stalls with the disks kept;
    onDelete set to false lets it go on."""
    backup = {"schedule": "0 3 * * *", "onDelete": True}
    await create(orchestrator, namespace, {**SPEC, "backup": backup, "powerState": "Stopped"})
    orchestrator.kubectl("delete", "dbinstance", "db", "-n", namespace, "--wait=false")
    # Being deleted, it reads Terminating (kstatus), Stalled False; the step says why.
    held = ("False", "FinalBackupFailed")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "BackupScheduleRemoved") == held,
        what="the deletion held by the failed final backup",
    )
    assert custom(kube_api, namespace, "virtualmachines", "db") != {}
    assert [i["status"]["reason"] for i in dbbackups(kube_api, namespace)] == ["InstanceNotRunning"]
    orchestrator.patch(namespace, "db", {"backup": {**backup, "onDelete": False}})
    await orchestrator.delete(namespace, "db")
    assert custom(kube_api, namespace, "virtualmachines", "db") == {}


async def test_the_backup_annotation_takes_one_backup_per_value(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """dbi.dev/backup-requested-at: a value takes one backup (Manual), recorded as served;
    the same value again takes none, a new one another."""
    await create(orchestrator, namespace)

    def annotate(value: str) -> None:
        orchestrator.kubectl(
            "annotate",
            "dbinstance",
            "db",
            "-n",
            namespace,
            "--overwrite",
            f"{names.BACKUP_REQUESTED_AT}={value}",
        )

    def completed() -> list[str]:
        return [n for n, p in phases(kube_api, namespace).items() if p == "Completed"]

    def served() -> str | None:
        status = orchestrator.get(namespace, "db").get("status", {})
        return cast(str | None, status.get("served", {}).get("backupRequestedAt"))

    annotate("first")
    await orchestrator.until(lambda: len(completed()) == 1 and served() == "first", what="one")
    orchestrator.kubectl("annotate", "dbinstance", "db", "-n", namespace, "dbi.dev/other=x")
    await ready(orchestrator, namespace)
    await asyncio.sleep(3)
    assert len(dbbackups(kube_api, namespace)) == 1
    annotate("second")
    await orchestrator.until(lambda: len(completed()) == 2 and served() == "second", what="two")
    assert {i["spec"]["trigger"] for i in dbbackups(kube_api, namespace)} == {"Manual"}


async def test_a_tenants_bucket_takes_the_backups_and_restores_them(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
    s3_endpoint: str,
) -> None:
    """spec.backup.target.s3: the backup, and the WAL archived after it, go to the
    tenant's bucket with the keys of the tenant's Secret (the DBBackup names both); a new
    instance restores from there to a WAL location after the backup."""
    keys = {"AWS_ACCESS_KEY_ID": "tenant", "AWS_SECRET_ACCESS_KEY": "tenant-secret"}
    k8s.CoreV1Api(kube_api).create_namespaced_secret(
        namespace,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s3-keys"), string_data=keys),
    )
    s3 = {
        "bucket": S3_BUCKET,
        "prefix": f"{namespace}/pg",
        "endpoint": s3_endpoint,
        "credentialsSecret": "s3-keys",
    }
    target = {"schedule": "0 3 * * *", "target": {"s3": s3}}
    await create(orchestrator, namespace, {**SPEC, "backup": target})
    url = f"s3://{S3_BUCKET}/{namespace}/pg/"
    tenant = S3Store(
        StoreLocation.parse(url), endpoint=s3_endpoint, keys=("tenant", "tenant-secret")
    )
    await archive_now(orchestrator, namespace, kube_api, tenant)  # archiving has begun
    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1, 50)")
    backup = (await backed_up(orchestrator, local_stack, namespace))["backup"]
    [item] = dbbackups(kube_api, namespace)
    assert item["status"]["store"] == {
        "url": url,
        "endpoint": s3_endpoint,
        "credentialsSecret": "s3-keys",
    }
    files = tenant.keys(backups.store_prefix(namespace, "db", backup))
    assert any(f.endswith(backupstore.MANIFEST) for f in files)
    assert store().keys(backups.store_prefix(namespace, "db", backup)) == []

    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(51, 80)")
    lsn = "SELECT pg_current_wal_lsn()::text"
    (after,) = await asyncio.to_thread(admin, kube_api, orchestrator, namespace, lsn)
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(81, 90)")
    await archive_now(orchestrator, namespace, kube_api, tenant)
    assert not store().keys(f"{namespace}/db/_wal/")  # the tenant's WAL: in its bucket only

    restore = {"from": {"instance": "db"}, "lsn": after}
    orchestrator.apply(namespace, "copy", {**SPEC, "restore": restore})
    await ready(orchestrator, namespace, "copy")
    with psycopg.connect(uri(kube_api, namespace, "copy"), connect_timeout=3) as conn:
        assert conn.execute("SELECT count(*), max(id) FROM orders").fetchone() == (80, 80)


async def test_a_target_without_its_secret_stalls_naming_it(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    """spec.backup.target's Secret is missing: the backup step stalls, naming it."""
    s3 = {"bucket": S3_BUCKET, "credentialsSecret": "nowhere"}
    spec = {**SPEC, "backup": {"schedule": "@daily", "target": {"s3": s3}}}
    orchestrator.apply(namespace, "db", spec)
    stalled = ("True", "NoBackupStore")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled NoBackupStore",
    )
    status = orchestrator.get(namespace, "db")["status"]
    said = next(c for c in status["conditions"] if c["type"] == "BackupScheduled")["message"]
    assert f"spec.backup.target.s3.credentialsSecret: Secret {namespace}/nowhere" in said


async def test_a_backup_whose_store_is_gone_stays_and_retention_goes_on(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
    s3_endpoint: str,
) -> None:
    """A backup in the tenant's bucket, then its keys' Secret deleted and the backups moved
    to the orchestrator's store, keeping one: the next backup completes and prunes
    nothing it cannot reach (the old one stays, whole); with the Secret back, the next
    prune deletes it. Retention never stops for good."""
    core = k8s.CoreV1Api(kube_api)
    keys = {"AWS_ACCESS_KEY_ID": "tenant", "AWS_SECRET_ACCESS_KEY": "tenant-secret"}
    secret_body = k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="s3-keys"), string_data=keys)
    core.create_namespaced_secret(namespace, secret_body)
    s3 = {"bucket": S3_BUCKET, "prefix": namespace, "endpoint": s3_endpoint}
    target = {"target": {"s3": {**s3, "credentialsSecret": "s3-keys"}}}
    keep_one = {"schedule": "0 3 * * *", "retention": {"count": 1}}
    await create(orchestrator, namespace, {**SPEC, "backup": {**keep_one, **target}})
    first = (await backed_up(orchestrator, local_stack, namespace))["backup"]

    core.delete_namespaced_secret("s3-keys", namespace)
    orchestrator.patch(namespace, "db", {"backup": {**keep_one, "target": None}})
    await ready(orchestrator, namespace)
    second = await backed_up(orchestrator, local_stack, namespace)
    assert second["phase"] == "Completed" and second["pruned"] == []
    assert {i["metadata"]["name"] for i in dbbackups(kube_api, namespace)} == {
        first,
        second["backup"],
    }

    core.create_namespaced_secret(namespace, secret_body)
    third = await backed_up(orchestrator, local_stack, namespace)
    assert sorted(third["pruned"]) == sorted([first, second["backup"]])
    assert [i["metadata"]["name"] for i in dbbackups(kube_api, namespace)] == [third["backup"]]
