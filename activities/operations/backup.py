"""The backup workflow's bookkeeping: the DBBackup object and its end.

- ``begin_backup`` records the backup as a DBBackup (Running) and says whether it can
  be taken now (an instance stopped as asked, or being deleted, is skipped, with nothing
  recorded, but for its final backup, which the teardown waits for); the
  object's name comes from the workflow (``dbi.backups.backup_name``), so a retry
  finds the object it made, and another workflow's object of that name is left alone.
  It first takes the instance's backup lease (``activities.infra.backup_lease``): while
  another backup of the instance runs, nothing is recorded and the answer says which
  runs (``BackupRunning``, also as an Event).
- ``finish_backup`` writes how it ended: Completed with what the store holds, or Failed
  with a reason; then, for a failed one, deletes whatever its attempts left in the store
  (a backup is there whole or not at all), as far as the store lets it: a store that
  cannot be reached leaves the files to retention, which deletes a failed backup's
  files before its object. An Event on the instance says how it ended.

Retention (``prune_backups``) is ``activities.operations.retention``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from temporalio import activity

from activities.infra import addresses, backup_lease, backupstore
from activities.infra.context import Activity, Context
from activities.infra.events import emit
from activities.infra.kube import JSON_PATCH, Instance, Kube, namespace_terminating
from activities.steps.loop import NAMESPACE_TERMINATING
from dbi import backups, names, pipeline
from dbi.backups import BackupPhase, BackupRequest, Begun, Finish, Reason, Trigger
from dbi.spec import PowerState
from dbi.status import Event

API = (names.GROUP, names.VERSION)
WORKFLOW_ANNOTATION = "dbi.dev/backup-workflow"
NAME_TAKEN = "NameTaken"


class BeginBackup(Activity):
    @activity.defn(name=pipeline.BEGIN_BACKUP)
    def run(self, request: BackupRequest, backup: str) -> Begun:
        """Record ``backup`` of the instance as Running, once; say whether to take it."""
        instance = self.ctx.kube.instance(request.namespace, request.name)
        final = request.trigger is Trigger.DELETE  # the teardown waits for this one
        if instance is None or (instance.deleting and not final):
            return Begun(reason=Reason.INSTANCE_GONE, message="The instance is gone.")
        if instance.model.spec.power_state is PowerState.STOPPED and not final:
            # Stopped as asked: nothing to record (a schedule would pile up failures).
            return Begun(reason=Reason.STOPPED, message="The instance is stopped as asked.")
        refused = self._hold(request, instance, backup, final=final)
        if refused is not None:
            return refused
        return self._takeable(Begun(backup=backup, uid=instance.uid), instance, final=final)

    def _hold(
        self, request: BackupRequest, instance: Instance, backup: str, *, final: bool
    ) -> Begun | None:
        """Take the instance's backup lease (not for the final backup) and record the
        DBBackup; a Begun that says why not when either cannot be had."""
        workflow_id = activity.info().workflow_id or ""
        kube, home = self.ctx.kube, self.ctx.config.namespace
        if not final:
            me = backup_lease.Holder(workflow_id, backup)
            holder = backup_lease.acquire(kube, home, instance.uid, me, running=self._running)
            if holder is not None:
                return _busy(kube, instance, holder)
        refused = _record(kube, request, backup, workflow_id, instance.uid)
        if refused is not None and not final:
            backup_lease.release(kube, home, instance.uid, workflow_id)
        return refused

    def _takeable(self, begun: Begun, instance: Instance, *, final: bool) -> Begun:
        """``begun``, with the reason it cannot be taken now if so (no store, not running)."""
        try:
            backupstore.for_instance(self.ctx.kube, self.ctx.config, instance)
        except ValueError as e:
            message = f"No backup store: {e}."
            return begun.model_copy(update={"reason": Reason.NO_STORE, "message": message})
        if addresses.address_of(addresses.vmi_of(self.ctx.kube, instance)) is None:
            message = "The instance is not running; start it to back it up."
            if final:  # a deleted instance is not started again
                message = (
                    "The instance is not running, and one being deleted is not started: set "
                    "spec.backup.onDelete to false, or spec.deletionPolicy to Retain."
                )
            return begun.model_copy(update={"reason": Reason.NOT_RUNNING, "message": message})
        return begun

    def _running(self, workflow_id: str) -> bool:
        """Whether the backup workflow ``workflow_id`` still runs (without Temporal
        access, a holder is taken to run)."""
        if self.ctx.schedules is None:
            return True
        found = self.ctx.schedules.run(workflow_id)
        return found is not None and found.running


def _busy(kube: Kube, instance: Instance, holder: backup_lease.Holder) -> Begun:
    """The answer to a backup asked for while another of the instance runs."""
    message = (
        f"Backup {holder.backup or holder.workflow_id} of this instance is running; this "
        "one was not taken. Ask again once it has ended."
    )
    event = Event(type="Normal", reason=Reason.RUNNING, message=message)
    emit(kube, instance, event, datetime.now(UTC))
    return Begun(reason=Reason.RUNNING, message=message)


def _record(
    kube: Kube, request: BackupRequest, backup: str, workflow_id: str, uid: str
) -> Begun | None:
    """Create the DBBackup (Running, of the instance with ``uid``) unless this workflow
    did already; a Begun that says why not when it cannot be recorded."""
    found = kube.get_custom(*API, request.namespace, names.BACKUP_PLURAL, backup)
    if found is None:
        try:
            found = _create(kube, request, backup, workflow_id)
        except k8s.ApiException as e:
            if not namespace_terminating(e):
                raise
            message = "The namespace is being deleted: its disks go with it, unsaved."
            return Begun(reason=NAMESPACE_TERMINATING, message=message)
    if found["metadata"].get("annotations", {}).get(WORKFLOW_ANNOTATION) != workflow_id:
        return Begun(reason=NAME_TAKEN, message=f"Another backup is named {backup}.")
    if not found.get("status", {}).get("phase"):
        _write(kube, request.namespace, backup, running(workflow_id, uid))
    return None


def _create(kube: Kube, request: BackupRequest, backup: str, workflow_id: str) -> dict[str, Any]:
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.BACKUP_KIND,
        "metadata": {
            "name": backup,
            "namespace": request.namespace,
            "labels": {names.INSTANCE_LABEL: request.name},
            "annotations": {WORKFLOW_ANNOTATION: workflow_id},
            "finalizers": [names.BACKUP_FINALIZER],
        },
        "spec": {"instance": request.name, "trigger": request.trigger.value},
    }
    try:
        return kube.create_custom(*API, names.BACKUP_PLURAL, body)
    except k8s.ApiException as e:
        if e.status != 409:
            raise
    found = kube.get_custom(*API, request.namespace, names.BACKUP_PLURAL, backup)
    if found is None:  # created and deleted since: the next attempt creates it again
        raise RuntimeError(f"DBBackup {backup} vanished while it was being recorded")
    return found


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _conditions(phase: BackupPhase, reason: str, message: str) -> list[dict[str, Any]]:
    """Ready, Reconciling and Stalled as kstatus reads them, for a backup in ``phase``."""
    now = _now()
    states = {
        "Ready": phase is BackupPhase.COMPLETED,
        "Reconciling": phase is BackupPhase.RUNNING,
        "Stalled": phase is BackupPhase.FAILED,
    }
    return [
        {
            "type": kind,
            "status": "True" if on else "False",
            "reason": reason,
            "message": message,
            "lastTransitionTime": now,
            "observedGeneration": 1,
        }
        for kind, on in states.items()
    ]


def running(workflow_id: str, uid: str) -> dict[str, Any]:
    message = "pg_basebackup is copying the instance to the backup store."
    return {
        "phase": BackupPhase.RUNNING.value,
        "startedAt": _now(),
        "workflowId": workflow_id,
        "instanceUID": uid,
        "observedGeneration": 1,
        "conditions": _conditions(BackupPhase.RUNNING, "Running", message),
    }


def _write(kube: Kube, namespace: str, backup: str, status: dict[str, Any]) -> None:
    kube.patch_custom_status(*API, names.BACKUP_PLURAL, namespace, backup, status)


class FinishBackup(Activity):
    @activity.defn(name=pipeline.FINISH_BACKUP)
    def run(self, finish: Finish) -> None:
        """Write how the backup ended; a failed one's files then leave the store."""
        kube = self.ctx.kube
        taken = finish.taken
        if taken is None:
            reason = finish.reason or Reason.FAILED
            message = finish.message or "The backup failed; the worker's log says why."
            status: dict[str, Any] = {
                "phase": BackupPhase.FAILED.value,
                "reason": reason,
                "message": message,
                "conditions": _conditions(BackupPhase.FAILED, reason, message),
            }
            event = Event(
                type="Warning", reason=Reason.FAILED, message=f"{finish.backup}: {message}"
            )
        else:
            message = (
                f"{taken.size_bytes} bytes of PostgreSQL {taken.postgres_version} in the store."
            )
            status = {
                "phase": BackupPhase.COMPLETED.value,
                "sizeBytes": taken.size_bytes,
                "postgresVersion": taken.postgres_version,
                "wal": taken.wal.model_dump(by_alias=True),
                "systemIdentifier": taken.system_identifier,
                "location": taken.location,
                "store": taken.store.model_dump(by_alias=True) if taken.store else None,
                "conditions": _conditions(BackupPhase.COMPLETED, "Completed", message),
            }
            event = Event(
                type="Normal", reason="BackupCompleted", message=f"{finish.backup}: {message}"
            )
        _write(kube, finish.namespace, finish.backup, {**status, "finishedAt": _now()})
        if finish.uid is not None:
            home, workflow_id = self.ctx.config.namespace, activity.info().workflow_id or ""
            backup_lease.release(kube, home, finish.uid, workflow_id)
        instance = kube.instance(finish.namespace, finish.name)
        if instance is not None:
            emit(kube, instance, event, datetime.now(UTC))
        if taken is None:
            _discard(self.ctx, finish, instance)


def _discard(ctx: Context, finish: Finish, instance: Instance | None) -> None:
    """Delete what a failed backup's attempts wrote, as far as the store allows."""
    try:
        store = (
            backupstore.for_instance(ctx.kube, ctx.config, instance)
            if instance is not None
            else backupstore.open_store(ctx.config)
        )
        prefix = backups.store_prefix(finish.namespace, finish.name, finish.backup)
        removed = store.delete(prefix)
    except (ValueError, OSError, backupstore.StoreFailed) as e:
        # No store, or one that cannot be reached: retention deletes the files later.
        activity.logger.warning("files of failed backup %s kept: %s", finish.backup, e)
        return
    if removed:
        activity.logger.info("removed %d files of failed backup %s", removed, finish.backup)


def let_go(kube: Kube, namespace: str, backup: str) -> None:
    """Take dbi's finalizer off a DBBackup whose files are gone (so it can go), naming
    the finalizers read (a JSON patch test): a change meanwhile fails the patch."""
    found = kube.get_custom(*API, namespace, names.BACKUP_PLURAL, backup)
    held = list(((found or {}).get("metadata") or {}).get("finalizers") or [])
    if names.BACKUP_FINALIZER not in held:
        return
    body = [
        {"op": "test", "path": "/metadata/finalizers", "value": held},
        {
            "op": "replace",
            "path": "/metadata/finalizers",
            "value": [f for f in held if f != names.BACKUP_FINALIZER],
        },
    ]
    try:
        kube.objects.patch_namespaced_custom_object(
            *API, namespace, names.BACKUP_PLURAL, backup, body, _content_type=JSON_PATCH
        )
    except k8s.ApiException as e:
        # Gone, or changed since it was read (another worker let it go): the next
        # look finds it as it is.
        if e.status not in (404, 409, 422):
            raise
