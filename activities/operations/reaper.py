"""reap_backups: the files of DBBackups deleted by hand or with their namespace.

Every DBBackup dbi records carries its finalizer (``names.BACKUP_FINALIZER``), so a
deletion (``kubectl delete dbbackup``, a namespace deleted) leaves the object until
its files are gone. Once a minute (a Temporal Schedule, ``workflows.reaper``) this
activity lists the DBBackups being deleted that still carry it, deletes each one's
files from its store, then takes the finalizer off. Files in the orchestrator's store
that cannot be deleted now keep the finalizer (the next run tries again); a tenant's
bucket that cannot be opened or reached any more (its keys' Secret deleted with the
namespace, say) does not hold the deletion: those files are the tenant's, in the
tenant's bucket, and the worker's log names them.
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from activities.infra import backupstore
from activities.infra.context import Activity
from activities.infra.kube import Kube
from activities.operations.backup import API, let_go
from dbi import backups, environment, names, pipeline
from dbi.backups import StoreRef


class ReapBackups(Activity):
    @activity.defn(name=pipeline.REAP_BACKUPS)
    def run(self) -> list[str]:
        """Delete the files of every DBBackup being deleted, then let it go; return
        their ``namespace/name``."""
        reaped = []
        for item in _being_deleted(self.ctx.kube):
            meta = item["metadata"]
            activity.heartbeat(meta["name"])
            if self._drop_files(item):
                let_go(self.ctx.kube, meta["namespace"], meta["name"])
                reaped.append(f"{meta['namespace']}/{meta['name']}")
        return reaped

    def _drop_files(self, item: dict[str, Any]) -> bool:
        """Delete a DBBackup's files; whether it may go now."""
        meta, status = item["metadata"], item.get("status") or {}
        ref = StoreRef.model_validate(status["store"]) if status.get("store") else None
        prefix = backups.store_prefix(
            meta["namespace"], (item.get("spec") or {}).get("instance", ""), meta["name"]
        )
        try:
            store = backupstore.for_ref(self.ctx.kube, self.ctx.config, meta["namespace"], ref)
            store.delete(prefix)
        except (ValueError, OSError, backupstore.StoreFailed) as e:
            if ref is None:  # the operator's own store: try again at the next run
                activity.logger.warning("files of %s kept for now: %s", meta["name"], e)
                return False
            activity.logger.warning(
                "files of %s/%s left in the tenant's bucket %s: %s",
                meta["namespace"],
                meta["name"],
                ref.url,
                e,
            )
        return True


def _being_deleted(kube: Kube) -> list[dict[str, Any]]:
    """The DBBackups being deleted that carry dbi's finalizer, in the namespaces the
    worker serves (DBI_WATCH_NAMESPACES, else all)."""
    served = environment.WATCH_NAMESPACES.items()
    lists: list[Any] = (
        [kube.objects.list_cluster_custom_object(*API, names.BACKUP_PLURAL)]
        if served is None
        else [
            kube.objects.list_namespaced_custom_object(*API, ns, names.BACKUP_PLURAL)
            for ns in sorted(served)
        ]
    )
    return [
        item
        for found in lists
        for item in found.get("items", [])
        if item["metadata"].get("deletionTimestamp")
        and names.BACKUP_FINALIZER in (item["metadata"].get("finalizers") or [])
    ]
