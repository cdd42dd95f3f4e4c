"""The restore test workflow's activities (``workflows.restoretest``).

- ``begin_restore_test`` says to wait while the newest backup's first WAL segment is not
  stored yet (a test right after a backup would fail on it), else makes the throwaway
  DBInstance (``dbi.restoretest``): the
  tested instance's spec, restored from its newest Completed backup and the WAL
  archived since, owned by the tested instance (deleting it takes the throwaway too),
  labelled with its name and annotated with the test's run. A retry finds the one its
  run made; one an earlier run left (its workflow ended before it could delete it) is
  deleted first, and the activity retried until it is gone. An instance of that name
  that is not the tested instance's throwaway is never touched: the test fails naming
  it.
- ``check_restore_test`` reads the throwaway and judges it (``dbi.restoretest.judge``).
- ``end_restore_test`` deletes the throwaway (only one the tested instance owns) and
  writes ``status.restoreTest`` on the tested instance (a merge of that field only: a
  pass's status write leaves it, and shows it as the condition RestoreTestSucceeded).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubernetes import client as k8s
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.infra.context import Activity
from activities.infra.kube import Instance, Kube
from activities.operations.retention import held
from dbi import names, pipeline, restoretest
from dbi.backups import BackupPhase
from dbi.fields import duration_seconds
from dbi.restoretest import Reason, RestoreTestBegun, RestoreTestEnd, RestoreTestRequest, Verdict

API = (names.GROUP, names.VERSION)
RUN_ANNOTATION = "dbi.dev/restore-test-run"


class BeginRestoreTest(Activity):
    @activity.defn(name=pipeline.BEGIN_RESTORE_TEST)
    def run(self, request: RestoreTestRequest) -> RestoreTestBegun:
        """Make the throwaway instance, once per run; or say why no test runs."""
        kube = self.ctx.kube
        instance = kube.instance(request.namespace, request.name)
        backup = None if instance is None else instance.model.spec.backup
        if instance is None or instance.deleting or backup is None or backup.restore_test is None:
            return RestoreTestBegun(reason=Reason.NOT_ASKED, message="No restore test is asked.")
        uid, timeout = instance.uid, duration_seconds(backup.restore_test.timeout)
        completed = [h for h in held(kube, instance) if h.phase is BackupPhase.COMPLETED]
        if not completed:
            message = f"{instance.name} has no Completed DBBackup to restore."
            return RestoreTestBegun(uid=uid, reason=Reason.NO_BACKUP, message=message)
        newest = max(completed, key=lambda h: h.started or datetime.min.replace(tzinfo=UTC))
        archive = instance.model.status.archive
        pending = restoretest.unarchived(newest, archive.last_archived_wal if archive else None)
        if pending is not None:
            return RestoreTestBegun(uid=uid, reason=Reason.WAL_PENDING, message=pending)
        name = restoretest.throwaway_name(instance.name, uid)
        run = activity.info().workflow_id or ""
        found = kube.get_custom(*API, instance.namespace, names.PLURAL, name)
        if found is not None and not owned(found, uid):
            message = (
                f"DBInstance {name} is there and is not {instance.name}'s restore test; "
                "it is left alone. Rename it, or delete it, for the tests to run."
            )
            return RestoreTestBegun(uid=uid, reason=Reason.NAME_TAKEN, message=message)
        if found is not None and _annotations(found).get(RUN_ANNOTATION) != run:
            kube.delete_custom(*API, instance.namespace, names.PLURAL, name)
            raise ApplicationError(f"{name}, an earlier test's throwaway, is being deleted first")
        if found is None:
            kube.create_custom(*API, names.PLURAL, _throwaway(instance, name, run))
        return RestoreTestBegun(instance=name, uid=uid, timeout_seconds=timeout)


def _throwaway(instance: Instance, name: str, run: str) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {
            "name": name,
            "namespace": instance.namespace,
            "labels": {restoretest.TESTED_LABEL: instance.name},
            "annotations": {RUN_ANNOTATION: run},
            "ownerReferences": [instance.owner_reference()],
        },
        "spec": restoretest.throwaway_spec(instance.model.spec, instance.name),
    }


def owned(obj: dict[str, Any], uid: str) -> bool:
    """Whether ``obj`` is the throwaway of the instance of ``uid``: that instance owns
    it (an owner reference names a UID no one else can give)."""
    references = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == uid and r.get("kind") == names.KIND for r in references)


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


class CheckRestoreTest(Activity):
    @activity.defn(name=pipeline.CHECK_RESTORE_TEST)
    def run(self, namespace: str, name: str) -> Verdict:
        """How the throwaway ``name`` stands."""
        found = self.ctx.kube.get_custom(*API, namespace, names.PLURAL, name)
        if found is None or (found.get("metadata") or {}).get("deletionTimestamp"):
            message = f"{name} was deleted before it went Ready."
            return Verdict(over=True, reason=Reason.VANISHED, message=message)
        return restoretest.judge(found)


class EndRestoreTest(Activity):
    @activity.defn(name=pipeline.END_RESTORE_TEST)
    def run(self, end: RestoreTestEnd) -> None:
        """Delete the throwaway; write how the test went on the tested instance."""
        kube = self.ctx.kube
        if end.instance is not None:
            _delete_owned(kube, end.namespace, end.instance, end.uid)
        instance = kube.instance(end.namespace, end.name)
        if instance is None or instance.uid != end.uid:
            return  # the tested instance is gone: nothing to write on
        tested = {
            "succeeded": end.succeeded,
            "reason": end.reason,
            "message": end.message,
            "instance": end.instance,
            "startedAt": _stamp(end.started_at),
            "finishedAt": _stamp(end.finished_at),
        }
        try:
            kube.patch_custom_status(
                *API, names.PLURAL, end.namespace, end.name, {"restoreTest": tested}
            )
        except k8s.ApiException as e:
            if e.status != 404:  # 404: deleted since it was read
                raise


def _delete_owned(kube: Kube, namespace: str, name: str, uid: str) -> None:
    found = kube.get_custom(*API, namespace, names.PLURAL, name)
    if found is not None and owned(found, uid):
        kube.delete_custom(*API, namespace, names.PLURAL, name)


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
