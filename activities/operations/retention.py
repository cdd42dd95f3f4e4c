"""Retention: what ``spec.backup.retention`` no longer keeps leaves the store.

- ``prune_backups`` (after each backup) deletes the backups retention no longer keeps
  (``dbi.backups.expired``): the store's files first, then the object, so a crash
  between the two leaves an object whose next prune finishes the job, never files
  nothing points at. A backup whose store cannot be opened or reached stays for a later
  prune; the others go. Retention counts the backups whose status (written by dbi alone)
  names the instance's UID: a new instance of a deleted one's name never prunes the old
  one's backups, its final backup and the one it was restored from included.
- Then the archived WAL that no kept backup can replay goes (``prune_wal``). A restore
  to a point replays the WAL from the segment holding its base backup's start
  (``activities.infra.restore``), so the oldest kept Completed backup's start bounds what
  stays, per database system (a major upgrade begins a new one, under its own prefix:
  ``dbi.backups.wal_prefix``). ``dbi.wal.prunable`` decides; the kept backups'
  statuses give their starts and systems (``wal``, ``systemIdentifier``). When in doubt,
  WAL stays: a kept backup whose status names no start stops the prune, and a system no
  kept backup is of keeps all of its WAL while it is the newest (the new one after a
  major upgrade, before its first backup completes). An older one (the one an upgrade
  replaced, once its last backup is gone) goes whole: ``dbi.wal.superseded``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio import activity

from activities.infra import backupstore
from activities.infra.context import Activity, Context
from activities.infra.kube import Instance, Kube
from activities.operations.backup import API, let_go
from dbi import backups, names, pipeline, wal
from dbi.backups import BackupPhase, BackupRequest, Held, StoreRef


class PruneBackups(Activity):
    @activity.defn(name=pipeline.PRUNE_BACKUPS)
    def run(self, request: BackupRequest) -> list[str]:
        """Delete the backups spec.backup.retention no longer keeps; return their names."""
        kube = self.ctx.kube
        instance = kube.instance(request.namespace, request.name)
        if instance is None or instance.model.spec.backup is None:
            return []  # no retention asked: every backup stays
        retention = instance.model.spec.backup.retention
        found = {h.name: h for h in held(kube, instance)}
        doomed = backups.expired(list(found.values()), retention, datetime.now(UTC))
        pruned = []
        for name in doomed:
            activity.heartbeat(name)
            ref = found[name].store
            try:
                store = backupstore.for_ref(kube, self.ctx.config, instance.namespace, ref)
                store.delete(backups.store_prefix(instance.namespace, instance.name, name))
            except (ValueError, OSError, backupstore.StoreFailed) as e:
                # Its store cannot be opened or reached now (its keys' Secret deleted, say):
                # the backup stays, whole, for a later prune; the others still go.
                activity.logger.warning("backup %s kept: its store failed: %s", name, e)
                continue
            let_go(kube, instance.namespace, name)
            kube.delete_custom(*API, instance.namespace, names.BACKUP_PLURAL, name)
            pruned.append(name)
        kept = [
            h for h in found.values() if h.name not in pruned and h.phase is BackupPhase.COMPLETED
        ]
        try:
            dropped = prune_wal(self.ctx, instance, kept)
        except (ValueError, OSError, backupstore.StoreFailed) as e:
            activity.logger.warning("WAL of %s kept: its store failed: %s", instance.name, e)
        else:
            activity.logger.info("%d archived WAL files of %s deleted", len(dropped), instance.name)
        return pruned


def held(kube: Kube, instance: Instance) -> list[Held]:
    """The instance's DBBackups, as retention sees them: those whose status names its
    UID (a label or a name is anyone's to write)."""
    items = kube.list_custom(
        *API, instance.namespace, names.BACKUP_PLURAL, f"{names.INSTANCE_LABEL}={instance.name}"
    )
    return [
        _held(item)
        for item in items
        if (item.get("status") or {}).get("instanceUID") == instance.uid
    ]


def _held(item: dict[str, Any]) -> Held:
    status = item.get("status", {})
    phase = status.get("phase")
    started = status.get("startedAt")
    store = status.get("store")
    taken = status.get("wal") or {}
    try:
        begins = wal.holding(str(taken["start"]), int(taken["timeline"]))
    except (KeyError, TypeError, ValueError):
        begins = None  # not Completed, or no start it could be: prune_wal keeps the WAL
    return Held(
        name=item["metadata"]["name"],
        phase=BackupPhase(phase) if phase in BackupPhase.__members__.values() else None,
        started=datetime.fromisoformat(started) if started else None,
        store=StoreRef.model_validate(store) if store else None,
        begins=begins,
        system=status.get("systemIdentifier"),
    )


def prune_wal(ctx: Context, instance: Instance, kept: list[Held]) -> list[str]:
    """Delete the instance's archived WAL that no backup in ``kept`` (the Completed ones
    retention keeps) needs; return the keys deleted."""
    ns, name = instance.namespace, instance.name
    starts: dict[str, list[wal.Segment]] = {}
    for backup in kept:
        if backup.system is None:
            continue  # taken before WAL archiving: it replays no archived WAL
        if backup.begins is None:
            activity.logger.warning("WAL of %s/%s kept: %s has no start", ns, name, backup.name)
            return []
        starts.setdefault(backup.system, []).append(backup.begins)
    store = backupstore.for_instance(ctx.kube, ctx.config, instance)
    every = backups.wal_prefix(ns, name, instance.uid, "")
    archived: dict[str, list[str]] = {}  # by system
    for key in store.keys(every):
        system, _, file = key[len(every) :].partition("/")
        archived.setdefault(system, []).append(file)
    doomed = [
        f"{system}/{file}"
        for system, begun in sorted(starts.items())
        for file in wal.prunable(archived.get(system, []), begun)
    ]
    doomed += [
        f"{system}/{file}"
        for system in wal.superseded(archived, starts)
        for file in archived[system]
    ]
    for relative in doomed:
        activity.heartbeat(relative)
        store.delete(every + relative)
    return [every + relative for relative in doomed]
