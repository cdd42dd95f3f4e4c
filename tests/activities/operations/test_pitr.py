"""Point-in-time recovery on the real stack: rows written at t1, more at t2, the table
dropped at t3 (its segment archived by archive_timeout alone); a restore to just after
t2 has the table with both, one to just after t1, or to the LSN noted at t1, has the
first rows only, one to the backup's end (immediate) has no table yet; a point before
any backup, an LSN past the archive, or WAL with a gap is refused naming the field; a
restore to the archive's end right after a backup starts from that backup.
Another install's archiver leaves the instance alone; retention takes the WAL before
the oldest kept backup and nothing after; the status and `dbi backups` show what was
archived and the window it opens."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from temporalio.testing import ActivityEnvironment

from activities.infra.schedules import Schedules
from activities.operations.walarchive import ArchiveWal
from dbi import wal
from devstack.stack import StackInfo
from guest.files import SPOOL_LEASE
from tests import polling
from tests.activities.backups import (
    admin,
    archive_now,
    backed_up,
    dbbackups,
    store,
    stored,
)
from tests.activities.lifecycle import SPEC, create, ready, sql, uri
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher
from workflows.worker import step_activities

pytestmark = pytest.mark.stack

# Archiving on, a quiet database's segment completed within 30 s; backups by `dbi
# backup` only.
BACKUP = {"schedule": "0 3 1 1 *", "archiveTimeout": "30s"}


def now_on(kube_api: Any, namespace: str) -> datetime:
    """The server's clock, after the statement before committed."""
    (at,) = sql(kube_api, namespace, "SELECT clock_timestamp()")
    return at.astimezone(UTC)  # type: ignore[no-any-return]


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def archived_by_another_install(kubeconfig: str, orchestrator: Orchestrator, loop: Any) -> Any:
    """What the WAL archiver of another install (its own task queue, the same namespaces)
    visits now."""
    schedules = Schedules(orchestrator.client, loop, f"{orchestrator.task_queue}-another")
    hosted = step_activities(
        kubeconfig, schedules=schedules, hosted=lambda ctx: [ArchiveWal(ctx).run]
    )
    return ActivityEnvironment().run(hosted[0])


async def restored_with(
    orchestrator: Orchestrator, kube_api: Any, namespace: str, name: str, rows: int | None
) -> None:
    """Instance ``name`` goes Ready holding the first ``rows`` orders, recovered and
    promoted onto a timeline of its own; None: the backup alone (no orders table, and no
    archived WAL replayed: still on the first timeline)."""
    restored = await ready(orchestrator, namespace, name)
    assert restored["status"]["observed"]["postgresVersion"].startswith("18.")
    with psycopg.connect(uri(kube_api, namespace, name), connect_timeout=3) as conn:
        if rows is None:
            assert conn.execute("SELECT to_regclass('orders')").fetchone() == (None,)
        else:
            held = conn.execute("SELECT count(*), max(id) FROM orders").fetchone()
            assert held == (rows, rows)
    statement = "SELECT timeline_id FROM pg_control_checkpoint()"
    (timeline,) = await asyncio.to_thread(admin, kube_api, orchestrator, namespace, statement, name)
    assert timeline == 1 if rows is None else timeline >= 2


def stalled(orchestrator: Orchestrator, namespace: str, name: str) -> str:
    """The message of instance ``name``'s Stalled RestoreSourceInvalid, or ''."""
    if orchestrator.condition(namespace, name, "Stalled") != ("True", "RestoreSourceInvalid"):
        return ""
    conditions = orchestrator.get(namespace, name)["status"]["conditions"]
    return str(next(c for c in conditions if c["type"] == "Stalled")["message"])


async def test_a_restore_to_a_point_in_time_has_what_was_committed_before_it(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    await create(orchestrator, namespace, {**SPEC, "backup": BACKUP})
    before_any = stamp(datetime.now(UTC) - timedelta(hours=1))
    early = {"from": {"instance": "db"}, "pointInTime": before_any}
    orchestrator.apply(namespace, "early", {**SPEC, "restore": early})
    # The backup comes before the archiver's first visit (its lease run out, as if the
    # archiver had not come yet): the backup renews the lease itself, so the WAL from
    # its start on is kept, and every restore below begins from it.
    (spool,) = await asyncio.to_thread(
        admin, kube_api, orchestrator, namespace, "SELECT current_setting('dbi.wal_spool')"
    )
    expired = f"COPY (SELECT 'until 0') TO '{spool}/{SPOOL_LEASE}'"
    await asyncio.to_thread(admin, kube_api, orchestrator, namespace, expired)
    taken = await backed_up(orchestrator, local_stack, namespace)
    await archive_now(orchestrator, namespace, kube_api)  # archiving has begun
    # Another install that serves this namespace too leaves the WAL to the install whose
    # queue runs the instance's workflow: two would split it between their stores.
    loop = asyncio.get_running_loop()
    kubeconfig = local_stack.kubeconfig
    other = await asyncio.to_thread(archived_by_another_install, kubeconfig, orchestrator, loop)
    assert f"{namespace}/db" not in other, other

    sql(kube_api, namespace, "CREATE TABLE orders (id int)")
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(1, 100)")
    t1 = now_on(kube_api, namespace)
    lsn = "SELECT pg_current_wal_lsn()::text"
    (at_t1,) = await asyncio.to_thread(admin, kube_api, orchestrator, namespace, lsn)
    await asyncio.sleep(2.5)
    sql(kube_api, namespace, "INSERT INTO orders SELECT generate_series(101, 200)")
    t2 = now_on(kube_api, namespace)
    await asyncio.sleep(2.5)
    sql(kube_api, namespace, "DROP TABLE orders")
    # Nothing completes the DROP's segment but archive_timeout: a quiet database's last
    # write reaches the store all the same, within it and the archiver's next minute.
    assert sql(kube_api, namespace, "SHOW archive_timeout") == ("30s",)
    statement = "SELECT pg_walfile_name(pg_current_wal_lsn())"
    (last,) = await asyncio.to_thread(admin, kube_api, orchestrator, namespace, statement)
    await polling.until_awaited(
        lambda: stored(orchestrator, namespace, last, store()),
        timeout=200,
        what=f"{last}, completed by archive_timeout alone, archived",
    )

    after_t2 = stamp(t2.replace(microsecond=0) + timedelta(seconds=1))
    after_t1 = stamp(t1.replace(microsecond=0) + timedelta(seconds=1))
    targets = {
        "to-t2": ({"pointInTime": after_t2}, 200),
        "to-t1": ({"pointInTime": after_t1}, 100),
        "to-lsn": ({"lsn": at_t1.lower()}, 100),  # as some tools print it
        "past": ({"lsn": "FF/0"}, 0),  # refused: the archive does not reach it
        # The newest backup's own end, and no archived WAL: it came before the table.
        "at-backup": ({"immediate": True}, None),
    }
    for name, (target, _) in targets.items():
        restore = {"from": {"instance": "db"}, **target}
        orchestrator.apply(namespace, name, {**SPEC, "restore": restore})
    for name, (_, rows) in targets.items():
        if rows != 0:
            await restored_with(orchestrator, kube_api, namespace, name, rows)

    # A point before any backup, or past the archive, is refused naming the field,
    # before anything is made.
    said = await orchestrator.until(lambda: stalled(orchestrator, namespace, "early"), what="early")
    refused = "spec.restore.from.instance: db has no Completed DBBackup that ended before"
    assert f"{refused} {before_any}" in said
    said = await orchestrator.until(lambda: stalled(orchestrator, namespace, "past"), what="past")
    assert "spec.restore.lsn: FF/0 is past the archived WAL, which reaches" in said, said

    # A segment the restore needs, gone from the store (one between the backup's and the
    # last): the gap is named, nothing starts.
    await archive_now(orchestrator, namespace, kube_api)
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    keys = store().keys(f"{namespace}/db/_wal/{uid}/")
    segments = sorted(k for k in keys if k.endswith(".gz") and len(k.rsplit("/", 1)[1]) == 27)
    assert store().delete(segments[-2]) == 1
    orchestrator.apply(namespace, "gap", {**SPEC, "restore": {"from": {"instance": "db"}}})
    said = await orchestrator.until(lambda: stalled(orchestrator, namespace, "gap"), what="gap")
    missing = segments[-2].rsplit("/", 1)[1].removesuffix(".gz")
    assert f"after DBBackup {taken['backup']}, WAL segment {missing} is missing" in said, said
    await retention_keeps_the_wal_of_the_kept_backup(
        orchestrator, namespace, kube_api, local_stack, taken["backup"]
    )
    await restored_right_after_a_backup(orchestrator, namespace, kube_api, local_stack)


async def restored_right_after_a_backup(
    orchestrator: Orchestrator, namespace: str, kube_api: Any, local_stack: StackInfo
) -> None:
    """A restore to the archive's end seconds after a backup, before the archiver (once a
    minute) stored the segment the backup begins in, starts from that backup alone:
    nothing archived reaches past its end, and it holds what was committed before it."""
    sql(kube_api, namespace, "CREATE TABLE latest AS SELECT 1 AS id")
    await backed_up(orchestrator, local_stack, namespace)
    orchestrator.apply(namespace, "latest", {**SPEC, "restore": {"from": {"instance": "db"}}})
    await ready(orchestrator, namespace, "latest")
    with psycopg.connect(uri(kube_api, namespace, "latest"), connect_timeout=3) as conn:
        assert conn.execute("SELECT id FROM latest").fetchall() == [(1,)]


async def retention_keeps_the_wal_of_the_kept_backup(
    orchestrator: Orchestrator, namespace: str, kube_api: Any, local_stack: StackInfo, first: str
) -> None:
    """Retention keeps one backup: each new one makes the one before go, and with it the
    stored WAL from before the new one's start; every segment from there on stays. (The
    segment a backup's start completes reaches the store after that backup's prune: the
    next prune takes it.) The WAL of an older database system (the one a major upgrade
    replaced, no backup of it kept) goes whole; a newer one's (an upgrade's, before its
    first backup) stays."""
    orchestrator.patch(namespace, "db", {"backup": {**BACKUP, "retention": {"count": 1}}})
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    every = f"{namespace}/db/_wal/{uid}/"
    [system] = {key.split("/")[-2] for key in store().keys(every)}
    older, newer = str(int(system) - 2**32), str(int(system) + 2**32)  # a second apart
    for planted in (older, newer):
        for file in ("000000010000000000000001.gz", "00000002.history.gz"):
            store().write(f"{every}{planted}/{file}", b"WAL of another system")

    def archived_now() -> list[str]:
        prefix = f"{every}{system}/"
        return [key.removeprefix(prefix) for key in store().keys(prefix)]

    def begins(backup: dict[str, Any]) -> wal.Segment:
        return wal.holding(backup["status"]["wal"]["start"], backup["status"]["wal"]["timeline"])

    starts = []
    for _ in range(2):
        taken = await backed_up(orchestrator, local_stack, namespace)
        [kept] = dbbackups(kube_api, namespace)
        assert kept["metadata"]["name"] == taken["backup"] != first
        starts.append(begins(kept))
        await archive_now(orchestrator, namespace, kube_api)
    left = archived_now()
    segments = sorted(name for name in left if wal.segment(name.removesuffix(".gz")))
    assert segments[0] >= f"{starts[0].name}.gz", left  # before the first: taken by the last
    assert wal.needed(left, starts[1]).problem is None  # from the kept one's start: all there
    assert store().keys(f"{every}{older}/") == []
    assert len(store().keys(f"{every}{newer}/")) == 2

    # The instance's status says what the archiver stored last; `dbi backups` turns it
    # into the window a restore to a point can reach.
    newest = segments[-1].removesuffix(".gz")

    def noted() -> dict[str, Any] | None:
        archive = orchestrator.get(namespace, "db")["status"].get("archive") or {}
        return archive if archive.get("lastArchivedWAL", "") >= newest else None

    archive = await orchestrator.until(noted, what=f"status.archive naming {newest}")
    assert archive["checkedAt"] >= archive["lastArchivedAt"] >= archive["since"]
    assert 0 <= archive["lagBytes"] < wal.SEGMENT_BYTES  # the segment being written
    listed = await asyncio.to_thread(dbi, local_stack, "backups", "db", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    window, checked = listed.stdout.splitlines()[-2:]
    assert window.startswith(
        f"recoverable: any moment from {kept['status']['finishedAt']} to about "
    ), window
    assert checked.startswith("WAL archiving: the archiver last emptied its spool at 20")
