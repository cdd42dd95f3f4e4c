"""The backup a restored instance starts from (``spec.restore``), checked and located.

The credentials step asks for it while the instance's boot data has none: the DBBackup
(``from.backup``, or the newest of ``from.instance`` that ended before ``pointInTime``)
must exist in the instance's namespace, have Completed, hold spec.version's major, and
have its manifest in the store; then the boot data gets where to fetch its two tarballs
(``dbi.bootstrap.Restore``). For a point in time, the archived WAL from the backup's
start on must be in the store without a gap (``dbi.wal.needed``); a listing of where
to fetch each file is written to the store, and the boot data names it. A restore to
the archive's end whose backup's first segment is not stored yet starts from the backup
alone: nothing archived reaches past the backup's own end. Once
delivered, the boot data keeps it and this is not asked again: a restored instance
does not depend on its backup staying (retention may delete it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from activities.infra import addresses, backupstore, postgres, trust, volumes
from activities.infra.context import Context
from activities.infra.kube import Instance
from dbi import backups, bootstrap, names, tls, wal
from dbi.backup_spec import moment_of
from dbi.backups import BackupPhase, StoreRef, Taken

FIELD = "spec.restore.from.backup"
INSTANCE_FIELD = "spec.restore.from.instance"
TARGET_FIELD = "spec.restore.pointInTime"
LSN_FIELD = "spec.restore.lsn"


class _Refused(Exception):
    """Why spec.restore cannot be restored: a sentence naming the field."""


class _NoneSince(_Refused):
    """Nothing is archived from the backup's start on: no WAL past its own end."""


def source(ctx: Context, instance: Instance) -> tuple[bootstrap.Restore | None, str | None]:
    """The backup to deliver (and the archived WAL after it, for a point in time), or
    None and why it cannot be restored (a sentence naming the field)."""
    try:
        return _source(ctx, instance), None
    except _Refused as e:
        return None, str(e)


def _source(ctx: Context, instance: Instance) -> bootstrap.Restore:
    spec = instance.model.spec
    assert spec.restore is not None
    ns, asked, target = instance.namespace, spec.restore.from_, spec.restore.point_in_time
    lsn = spec.restore.lsn.upper() if spec.restore.lsn is not None else None
    found, field = _chosen(ctx, instance)
    name, status = found["metadata"]["name"], found.get("status", {})
    if status.get("phase") != BackupPhase.COMPLETED:
        raise _Refused(
            f"{field}: DBBackup {name} is {status.get('phase') or 'new'}, not Completed."
        )
    held = postgres.major(status.get("postgresVersion"))
    if held != spec.version:
        raise _Refused(
            f"{field}: DBBackup {name} holds PostgreSQL {status.get('postgresVersion')}, "
            f"but spec.version is {spec.version}."
        )
    ref = status.get("store")
    try:
        store_ref = StoreRef.model_validate(ref) if ref else None
        store = backupstore.for_ref(ctx.kube, ctx.config, ns, store_ref)
    except ValueError as e:
        raise _Refused(f"{field}: DBBackup {name}'s store cannot be read ({e}).") from None
    of = found.get("spec", {}).get("instance", "")
    prefix = backups.store_prefix(ns, of, name)
    manifest = store.read(prefix + backupstore.MANIFEST)
    try:
        taken = Taken.model_validate_json(manifest or b"")
        base, wal_tar = taken.key("base.tar.gz"), taken.key("pg_wal.tar.gz")
    except (ValueError, KeyError):
        raise _Refused(f"{field}: DBBackup {name}'s files are not in the store.") from None
    restore = bootstrap.Restore(
        backup=name, base_url=store.url(prefix + base), wal_url=store.url(prefix + wal_tar)
    )
    to_end = target is None and lsn is None
    if to_end and (asked.backup is not None or spec.restore.immediate):
        return restore  # the backup alone
    try:
        archive_url = _archive(store, instance, of, taken, status, (target, lsn))
    except _NoneSince:
        if not to_end:
            raise
        # A backup seconds old, its first segment not stored yet: its own end is as far
        # as the store reaches (the archiver stores a segment after the backup ends).
        return restore
    return restore.model_copy(
        update={"archive_url": archive_url, "target_time": target, "target_lsn": lsn}
    )


def _chosen(ctx: Context, instance: Instance) -> tuple[dict[str, Any], str]:
    """The DBBackup spec.restore.from names, or the newest of its instance that ended
    before pointInTime (or lsn); and the field that chose it."""
    assert instance.model.spec.restore is not None
    ns, restore = instance.namespace, instance.model.spec.restore
    named = restore.from_.backup
    if named is not None:
        found = ctx.kube.get_custom(names.GROUP, names.VERSION, ns, names.BACKUP_PLURAL, named)
        if found is None:
            raise _Refused(
                f"{FIELD}: there is no DBBackup {named} in {ns} (dbi backups lists them)."
            )
        return found, FIELD
    of, target = restore.from_.instance or "", restore.point_in_time
    listed = ctx.kube.list_custom(
        names.GROUP, names.VERSION, ns, names.BACKUP_PLURAL, f"{names.INSTANCE_LABEL}={of}"
    )
    until = moment_of(target) if target is not None else None
    ended = [
        (moment_of(item["status"]["finishedAt"]), item)
        for item in listed
        if (item.get("status") or {}).get("phase") == BackupPhase.COMPLETED
        and item["status"].get("finishedAt")
    ]
    before = [(at, item) for at, item in ended if until is None or at <= until]
    if restore.lsn is not None:
        before = [(at, item) for at, item in before if _ended_by(item, restore.lsn)]
    if not before:
        when = f" that ended before {target}" if target is not None else ""
        when = f" that ended before LSN {restore.lsn}" if restore.lsn is not None else when
        raise _Refused(
            f"{INSTANCE_FIELD}: {of} has no Completed DBBackup{when} in {ns} "
            f"(dbi backups {of} lists them)."
        )
    return max(before, key=lambda pair: pair[0])[1], INSTANCE_FIELD


def _ended_by(item: dict[str, Any], lsn: str) -> bool:
    """Whether the DBBackup ``item`` ended at or before WAL location ``lsn``."""
    end = ((item.get("status") or {}).get("wal") or {}).get("end")
    return isinstance(end, str) and wal.lsn_value(end) <= wal.lsn_value(lsn)


def _archive(
    store: backupstore.Store,
    instance: Instance,
    of: str,
    taken: Taken,
    status: dict[str, Any],
    targets: tuple[str | None, str | None],
) -> str:
    """Where the guest reads the archived WAL to replay after ``taken`` (up to
    ``targets``: a time, or an LSN): a listing of presigned (or file) URLs, written to
    the store."""
    target, lsn = targets
    if taken.instance_uid is None or taken.system_identifier is None:
        raise _Refused(
            f"{TARGET_FIELD}: DBBackup {taken.backup} was taken before WAL archiving; "
            f"restore it alone ({FIELD}, without pointInTime)."
        )
    if target is not None:
        ended = status.get("finishedAt") or ""
        if ended and moment_of(target) < moment_of(ended):
            raise _Refused(
                f"{TARGET_FIELD}: {target} is before DBBackup {taken.backup} ended ({ended})."
            )
        if moment_of(target) > datetime.now(UTC):
            raise _Refused(f"{TARGET_FIELD}: {target} is in the future.")
    if lsn is not None and wal.lsn_value(lsn) < wal.lsn_value(taken.wal.end):
        raise _Refused(
            f"{LSN_FIELD}: {lsn} is before DBBackup {taken.backup} ended (LSN {taken.wal.end})."
        )
    prefix = backups.wal_prefix(instance.namespace, of, taken.instance_uid, taken.system_identifier)
    archived = [key[len(prefix) :] for key in store.keys(prefix)]
    need = wal.needed(archived, wal.holding(taken.wal.start, taken.wal.timeline))
    if need.problem is not None:
        refused = _NoneSince if need.none_since else _Refused
        raise refused(f"spec.restore: after DBBackup {taken.backup}, {need.problem}.")
    reached = need.last
    if lsn is not None and reached is not None and wal.holding(lsn, reached.timeline) > reached:
        raise _Refused(
            f"{LSN_FIELD}: {lsn} is past the archived WAL, which reaches {reached.name} "
            f"(dbi backups {of} shows the window)."
        )
    listing = {name: store.url(prefix + name + wal.ARCHIVED_SUFFIX) for name in need.files}
    key = f"{instance.namespace}/{instance.name}/_restore/{instance.uid}.json"
    store.write(key, json.dumps(listing, sort_keys=True).encode())
    return store.url(key)


def wanted(
    ctx: Context,
    instance: Instance,
    doc: bootstrap.Bootstrap | None,
    *,
    ca: tls.KeyPair | None,
    admin_password: str,
) -> tuple[bootstrap.Restore | None, str | None]:
    """The backup the boot data (``doc``) must name: the one it names already, else
    (before the data disk exists) the one spec.restore names, located; or why it cannot
    be."""
    asked = instance.model.spec.restore
    if asked is None:
        return None, None
    if doc is not None and doc.restore is not None:  # spec.restore never changes
        if restored(ctx, instance, ca, admin_password):
            return None, None  # its URLs (a presigned read of the backup) leave the boot data
        return doc.restore, None
    if volumes.own_data_claim(ctx, instance):
        return None, None  # the data exists: the first boot is past
    return source(ctx, instance)


def restored(ctx: Context, instance: Instance, ca: tls.KeyPair | None, admin_password: str) -> bool:
    """Whether the instance started from its backup: its PostgreSQL, on its own data
    claim, lets dbi's admin in (the first boot unpacks the backup before it starts it).
    Asked only while the boot data still names the backup."""
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None or ca is None or not volumes.own_data_claim(ctx, instance):
        return False
    server = trust.reach(instance, address, ca)
    return postgres.login(server, password=admin_password) is postgres.Login.OK
