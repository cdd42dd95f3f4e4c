"""The backup commands of the ``dbi`` CLI: ``dbi backup NAME`` (take one now and wait
for it, showing its progress) and ``dbi backups [NAME] [-A]`` (list DBBackups).

They choose the cluster and Temporal as the other operator commands do
(``commands.operate``) and exit with the same codes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from datetime import UTC, datetime
from typing import Any, cast

from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.converter import DataConverter
from temporalio.service import RPCError

from commands import operate
from commands.cluster import Kube, read_instance
from commands.operate import FAILED, NOT_FOUND, OK, REFUSED, TIMED_OUT, Answer
from dbi import environment, names
from dbi.backups import BackupPhase, BackupRequest, BackupResult, Trigger

PROGRESS_SECONDS = 5.0


async def backup(kube: Kube, namespace: str, name: str, *, timeout: float | None = None) -> Answer:
    """Start a backup of the instance now and wait for it (at most ``timeout`` seconds),
    printing its progress to stderr."""
    if read_instance(kube, namespace, name) is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    client = await operate.temporal_client(kube)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    workflow_id = f"{names.backup_workflow_id(namespace, name)}-manual-{stamp}"
    try:
        handle: WorkflowHandle[Any, BackupResult] = await client.start_workflow(
            names.BACKUP_WORKFLOW_TYPE,
            BackupRequest(namespace=namespace, name=name, trigger=Trigger.MANUAL),
            id=workflow_id,
            task_queue=environment.TASK_QUEUE.value(),
            result_type=BackupResult,
            search_attributes=names.instance_attributes(namespace, name),
        )
    except RPCError as e:
        return Answer(FAILED, f"dbi: backup failed to start: {e.message}")
    print(f"backup of {namespace}/{name} started: workflow {workflow_id}", file=sys.stderr)
    reporting = asyncio.create_task(_report(handle, client.data_converter))
    try:
        result = await asyncio.wait_for(handle.result(), timeout)
    except TimeoutError:
        within = f"within {timeout:g}s" if timeout is not None else "in time"
        return Answer(
            TIMED_OUT,
            f"dbi: the backup did not finish {within}; it goes on (dbi backups {name} "
            f"-n {namespace})",
        )
    except WorkflowFailureError as e:
        return Answer(FAILED, f"dbi: the backup workflow failed: {e.cause}")
    finally:
        reporting.cancel()
    return _answer(namespace, name, result)


def _answer(namespace: str, name: str, result: BackupResult) -> Answer:
    data = result.model_dump(mode="json", by_alias=True)
    if result.phase is BackupPhase.COMPLETED:
        pruned = f"; retention deleted {', '.join(result.pruned)}" if result.pruned else ""
        size = (result.size_bytes or 0) / 2**20
        return Answer(OK, f"backup {result.backup}: Completed, {size:.1f} MiB{pruned}", data)
    if result.backup is None:
        return Answer(REFUSED, f"dbi: no backup taken: {result.reason}: {result.message}", data)
    text = f"backup {result.backup}: Failed: {result.reason}: {result.message}"
    return Answer(REFUSED, text, data)


async def _report(handle: WorkflowHandle[Any, BackupResult], converter: DataConverter) -> None:
    """Print what the backup is doing every few seconds: the running activity and its
    last heartbeat (pg_basebackup's bytes written, or the file being uploaded)."""
    started = time.monotonic()
    while True:
        await asyncio.sleep(PROGRESS_SECONDS)
        with contextlib.suppress(RPCError):
            described = await handle.describe()
            for pending in described.raw_description.pending_activities:
                details = ""
                if pending.heartbeat_details.payloads:
                    decoded = await converter.decode(pending.heartbeat_details.payloads)
                    details = f": {decoded[0]}" if decoded else ""
                elapsed = time.monotonic() - started
                kind = pending.activity_type.name
                print(f"  {elapsed:4.0f}s {kind}{details}", file=sys.stderr, flush=True)


COLUMNS = ("NAME", "PHASE", "TRIGGER", "SIZE", "VERSION", "STARTED", "FINISHED", "REASON")


async def listing(kube: Kube, namespace: str | None, name: str | None) -> Answer:
    """List DBBackups, oldest first: the instance's (``name``; one deleted since is fine:
    its backups outlive it), else every instance's, of ``namespace`` (None: every
    namespace). As data: ``{"items": [...]}``, as ``dbi status`` gives it."""
    selector = f"{names.INSTANCE_LABEL}={name}" if name is not None else names.INSTANCE_LABEL
    if namespace is None:
        found = kube.objects().list_cluster_custom_object(
            names.GROUP, names.VERSION, names.BACKUP_PLURAL, label_selector=selector
        )
    else:
        found = kube.objects().list_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.BACKUP_PLURAL, label_selector=selector
        )
    items = sorted(
        cast(dict[str, Any], found)["items"],
        key=lambda i: (i["metadata"]["namespace"], i["metadata"]["name"]),
    )
    if not items:
        whose = f"{namespace or '*'}/{name}" if name is not None else namespace or "any namespace"
        return Answer(OK, f"no backups of {whose}", {"items": []})
    lead = ["NAMESPACE"] if namespace is None else []
    lead += ["INSTANCE"] if name is None else []
    rows = [(*lead, *COLUMNS), *(_row(item, namespace is None, name is None) for item in items)]
    text = operate.table(rows)
    if name is None:
        return Answer(OK, text, {"items": items})
    instance = read_instance(kube, namespace, name) if namespace is not None else None
    archive = ((instance or {}).get("status") or {}).get("archive")
    text += "\n" + recoverable(items, archive)
    if archive:
        text += (
            f"\nWAL archiving: the archiver last emptied its spool at {archive.get('checkedAt')}"
        )
    return Answer(OK, text, {"items": items, "archive": archive})


def recoverable(items: list[dict[str, Any]], archive: dict[str, Any] | None = None) -> str:
    """What a restore of the instance whose DBBackups are ``items`` can return to: any
    moment from the end of the oldest completed backup begun since its WAL is archived
    (``archive``: its status.archive) to the newest archived WAL, else the end of one of
    its completed backups."""
    done = [
        i["status"]
        for i in items
        if i.get("status", {}).get("phase") == "Completed" and i["status"].get("finishedAt")
    ]
    ends = sorted(str(s["finishedAt"]) for s in done)
    if not ends:
        return "recoverable: nothing yet (no completed backup)"
    since, latest = (archive or {}).get("since"), (archive or {}).get("lastArchivedAt")
    replayable = sorted(
        str(s["finishedAt"])
        for s in done
        if since and latest and str(s.get("startedAt") or "") >= since
    )
    if replayable:
        earlier = len([end for end in ends if end < replayable[0]])
        before = f"; before it, the end of {earlier} earlier backup(s)" if earlier else ""
        return (
            f"recoverable: any moment from {replayable[0]} to about {latest} (archived WAL "
            f"to {(archive or {}).get('lastArchivedWAL')}: spec.restore.pointInTime){before}"
        )
    if len(ends) == 1:
        return f"recoverable: the end of its one completed backup, {ends[0]}"
    return (
        f"recoverable: the end of one of its {len(ends)} completed backups, from {ends[0]} "
        f"to {ends[-1]} (nothing between: base backups only)"
    )


def _row(item: dict[str, Any], namespaced: bool, instance: bool) -> tuple[str, ...]:
    meta, status = item["metadata"], item.get("status", {})
    size = status.get("sizeBytes")
    lead = [meta["namespace"]] if namespaced else []
    lead += [(meta.get("labels") or {}).get(names.INSTANCE_LABEL, "-")] if instance else []
    return (
        *lead,
        meta["name"],
        status.get("phase", "-"),
        item.get("spec", {}).get("trigger", "-"),
        f"{size / 2**20:.1f}Mi" if size is not None else "-",
        status.get("postgresVersion", "-"),
        status.get("startedAt", "-"),
        status.get("finishedAt", "-"),
        status.get("reason", "-") or "-",
    )
