"""archive_wal: every running instance with ``spec.backup`` hands its WAL to the store.

The guest's archive_command (``guest.archive``) keeps each WAL file PostgreSQL
completes in a spool on the data disk while dbi's lease is in force. Once a minute (a
Temporal Schedule, ``workflows.walarchiver``) this activity visits each such instance
that this install drives (its workflow runs on this worker's task queue), as the admin
role over the same verified TLS as dbi's other connections:

1. renews the lease (``COPY ... TO`` the spool's lease file) for LEASE_SECONDS;
2. reads each whole file in the spool (``pg_ls_dir``, ``pg_read_binary_file``) and
   writes it to the instance's store under
   ``<namespace>/<instance>/_wal/<uid>/<system>/`` (``dbi.backups.wal_prefix``), a key
   no DBBackup's name can take;
3. writes the names it stored to the spool's ``uploaded`` file, whose files the guest's
   next archive_command deletes;
4. notes in ``status.archive`` what it stored, and the archive's lag: the bytes of WAL
   the server has written past the end of the newest segment stored. A guest whose
   archive_command keeps failing spools nothing, and that lag grows.

A file is stored before the guest may delete it, and storing it again writes the same
bytes: a worker killed at any point loses nothing, and the next visit finishes.
An instance whose guest booted before archiving existed (no ``dbi.wal_spool`` setting)
is skipped until its next boot, and said so. An instance that stops being visited (its
``spec.backup`` removed, dbi's workers down) lets its lease run out, and then the guest
lets its WAL go rather than fill the disk (``guest.archive``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import psycopg
from kubernetes import client as k8s
from psycopg import sql
from temporalio import activity
from temporalio.exceptions import CancelledError

from activities.infra import addresses, admin_credential, backupstore, postgres, trust
from activities.infra.context import Activity, Context
from activities.infra.kube import Instance, instance_of
from dbi import backups, environment, names, pipeline, wal
from dbi.spec import PowerState
from guest import files as guest_files

# The guest keeps WAL for the store this long after a visit; longer than any outage of
# dbi's workers that should not cost the recovery window.
LEASE_SECONDS = 3600
# status.archive.checkedAt is written at least this often while visits succeed.
CHECKED_EVERY = timedelta(minutes=10)
_API = (names.GROUP, names.VERSION)
Connection = psycopg.Connection[tuple[Any, ...]]


@dataclass(frozen=True)
class Visit:
    """What one visit of one instance did."""

    stored: list[str]  # SYSTEM/NAME.gz
    skipped: str | None = None  # why nothing was read, in words
    written: str | None = None  # pg_current_wal_lsn() once the spool was emptied


class ArchiveWal(Activity):
    @activity.defn(name=pipeline.ARCHIVE_WAL)
    def run(self) -> dict[str, str]:
        """Visit every running instance with spec.backup; return what each visit did,
        by ``namespace/name``."""
        said = {}
        for instance in _archived(self.ctx):
            key = f"{instance.namespace}/{instance.name}"
            activity.heartbeat(key)
            try:
                visit = visit_instance(self.ctx, instance)
            except CancelledError:
                raise
            except Exception as e:  # one instance's trouble holds up no other's WAL
                activity.logger.warning("WAL of %s not archived now: %r", key, e)
                said[key] = f"failed: {type(e).__name__}"
                continue
            said[key] = visit.skipped or f"stored {len(visit.stored)}"
            if visit.skipped is None:
                try:
                    _note(self.ctx, instance, visit)
                except k8s.ApiException as e:  # stored all the same; the next visit notes it
                    activity.logger.warning("status.archive of %s not written: %s", key, e)
        return said


def _note(ctx: Context, instance: Instance, visit: Visit) -> None:
    """Write ``status.archive`` after a visit that emptied the spool: when it stored a
    file, and at least every CHECKED_EVERY otherwise (an idle database's checks write
    little)."""
    seen = instance.model.status.archive
    now = datetime.now(UTC).replace(microsecond=0)
    checked = seen.checked_at if seen is not None else None
    if not visit.stored and checked is not None and now - checked < CHECKED_EVERY:
        return
    stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
    archive: dict[str, str | int] = {"checkedAt": stamp}
    segments = [stem for stem in map(_stem, visit.stored) if wal.segment(stem)]
    if segments:
        archive.update(lastArchivedWAL=max(segments), lastArchivedAt=stamp)
        if seen is None or seen.since is None:
            archive.update(since=stamp)
    newest = max(segments) if segments else seen.last_archived_wal if seen is not None else None
    if newest is not None and visit.written is not None:
        archive.update(lagBytes=wal.lag_bytes(visit.written, newest))
    try:
        ctx.kube.patch_custom_status(
            *_API, names.PLURAL, instance.namespace, instance.name, {"archive": archive}
        )
    except k8s.ApiException as e:
        if e.status != 404:  # 404: deleted since it was listed
            raise


def _stem(stored: str) -> str:
    """``SYSTEM/NAME.gz`` as the WAL file's name."""
    return stored.rsplit("/", 1)[-1].removesuffix(wal.ARCHIVED_SUFFIX)


def _archived(ctx: Context) -> list[Instance]:
    """The instances, in the namespaces the worker serves and whose workflows run on its
    task queue, whose spec asks for backups and a running VM (and that this worker's
    models read, and are not being deleted). Only the install that drives an instance
    archives its WAL: two would split it between their stores, and each would tell the
    guest to delete what only the other stored."""
    if ctx.schedules is None:
        raise RuntimeError("archive_wal needs the worker's Temporal client (Context.schedules)")
    here = ctx.schedules.instances_here()
    served = environment.WATCH_NAMESPACES.items()
    objects = ctx.kube.objects
    lists: list[Any] = (
        [objects.list_cluster_custom_object(*_API, names.PLURAL)]
        if served is None
        else [objects.list_namespaced_custom_object(*_API, ns, names.PLURAL) for ns in served]
    )
    listed = [instance_of(item) for found in lists for item in found.get("items", [])]
    return [
        instance
        for instance in sorted(listed, key=lambda i: (i.namespace, i.name))
        if (instance.namespace, instance.name) in here
        and instance.unreadable is None
        and not instance.deleting
        and instance.model.spec.backup is not None
        and instance.model.spec.power_state is PowerState.RUNNING
    ]


def visit_instance(ctx: Context, instance: Instance) -> Visit:
    """Renew the lease, store what the spool holds, tell the guest what was stored."""
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None:
        return Visit(stored=[], skipped="not running")
    store = backupstore.for_instance(ctx.kube, ctx.config, instance)
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    password = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid).password
    with postgres.connect(server, password=password) as conn:
        prefix = backups.wal_prefix(instance.namespace, instance.name, instance.uid, "")
        return visit(conn, store, prefix)


def visit(conn: Connection, store: backupstore.Store, prefix: str) -> Visit:
    """``visit_instance`` on an open admin session; files go under ``prefix`` +
    ``SYSTEM/NAME.gz``."""
    spool = lease(conn)
    if not spool:
        return Visit(stored=[], skipped="its guest archives no WAL before its next boot")
    uploaded = f"{spool}/{guest_files.SPOOL_UPLOADED}"
    known = set(_read(conn, uploaded).decode().split())
    spooled = _spooled(conn, spool)
    stored = []
    for relative in spooled:
        if relative in known:
            continue  # stored at an earlier visit; the guest has not deleted it yet
        activity.heartbeat(relative)
        store.write(prefix + relative, _read(conn, f"{spool}/{relative}"))
        stored.append(relative)
    if stored:
        _write(conn, uploaded, spooled)
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    return Visit(stored=stored, written=str(row[0]) if row else None)


def _spooled(conn: Connection, spool: str) -> list[str]:
    """The whole files in the spool, ``SYSTEM/NAME.gz``, oldest name first."""
    systems = conn.execute("SELECT pg_ls_dir(%s, true, false)", (spool,)).fetchall()
    found = []
    for (system,) in systems:
        if not str(system).isdigit():
            continue
        folder = f"{spool}/{system}"
        for (name,) in conn.execute("SELECT pg_ls_dir(%s, true, false)", (folder,)).fetchall():
            if str(name).endswith(guest_files.SPOOLED_SUFFIX):
                found.append(f"{system}/{name}")
    return sorted(found)


def _read(conn: Connection, path: str) -> bytes:
    """A file on the server, whole; empty when it is not there."""
    row = conn.execute("SELECT pg_read_binary_file(%s, true)", (path,), binary=True).fetchone()
    return bytes(cast(bytes, row[0])) if row and row[0] is not None else b""


def lease(conn: Connection) -> str:
    """Renew the guest's lease on archiving for LEASE_SECONDS, on an open admin session;
    return its spool ("" when its guest archives no WAL before its next boot). A base
    backup does so first too (``activities.operations.basebackup``): the WAL from its
    start on is kept even before the archiver's first visit."""
    row = conn.execute("SELECT current_setting('dbi.wal_spool', true)").fetchone()
    spool = str(row[0]) if row and row[0] else ""
    if spool:
        until = int(time.time()) + LEASE_SECONDS
        _write(conn, f"{spool}/{guest_files.SPOOL_LEASE}", [f"until {until}"])
    return spool


def _write(conn: Connection, path: str, lines: list[str]) -> None:
    """Write ``lines`` to a file on the server, replacing it (``COPY ... TO``, as the
    server's user)."""
    statement = sql.SQL("COPY (SELECT unnest({}::text[])) TO {}").format(
        sql.Literal(lines), sql.Literal(path)
    )
    conn.execute(statement)
