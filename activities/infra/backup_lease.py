"""One backup of an instance at a time: a Lease per instance in dbi's namespace.

``begin_backup`` takes the instance's lease (``dbi-backup-<uid>``) for its workflow
before it records a DBBackup, and ``finish_backup`` gives it back; a backup asked for
while another of the instance runs is answered (``BackupRunning``, naming it), never
queued. The lease lives where tenants cannot write; its holder is the backup's
workflow id, and one held by a workflow that no longer runs (terminated by hand, say)
is taken over, with the resourceVersion read, so two takers cannot both win. The final
backup of a deleted instance (one per UID, which the teardown waits for) takes none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from kubernetes import client as k8s

from activities.infra.kube import Kube, or_none
from dbi import names

PREFIX = "dbi-backup-"
BACKUP_ANNOTATION = "dbi.dev/backup"


def lease_name(uid: str) -> str:
    """The name of the backup lease of the instance with ``uid``."""
    return f"{PREFIX}{uid}"


@dataclass(frozen=True)
class Holder:
    """Who holds an instance's backup lease: a backup workflow, and its DBBackup."""

    workflow_id: str
    backup: str


def _coordination(kube: Kube) -> k8s.CoordinationV1Api:
    return k8s.CoordinationV1Api(kube.api)


def _body(home: str, uid: str, me: Holder, resource_version: str | None) -> k8s.V1Lease:
    return k8s.V1Lease(
        metadata=k8s.V1ObjectMeta(
            name=lease_name(uid),
            namespace=home,
            labels={"app.kubernetes.io/managed-by": "dbi"},
            annotations={BACKUP_ANNOTATION: me.backup, names.INSTANCE_UID_ANNOTATION: uid},
            resource_version=resource_version,
        ),
        spec=k8s.V1LeaseSpec(holder_identity=me.workflow_id, acquire_time=datetime.now(UTC)),
    )


def acquire(
    kube: Kube, home: str, uid: str, me: Holder, *, running: Callable[[str], bool]
) -> Holder | None:
    """Take the instance's backup lease for ``me``; None when taken (or held by ``me``
    already: a retry), else the holder that keeps it. ``running(workflow_id)`` tells
    whether a holder's workflow still runs; one that does not loses the lease."""
    api = _coordination(kube)
    for _ in range(2):  # a lost race to take over a stale lease: look once more
        try:
            api.create_namespaced_lease(home, _body(home, uid, me, None))
            return None
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        found = or_none(lambda: api.read_namespaced_lease(lease_name(uid), home))
        if found is None:
            continue  # given back meanwhile: create it again
        holder = (found.spec.holder_identity if found.spec else None) or ""
        annotations = (found.metadata.annotations if found.metadata else None) or {}
        if holder == me.workflow_id:
            return None
        if holder and running(holder):
            return Holder(holder, annotations.get(BACKUP_ANNOTATION, ""))
        version = found.metadata.resource_version if found.metadata else None
        try:
            api.replace_namespaced_lease(lease_name(uid), home, _body(home, uid, me, version))
            return None
        except k8s.ApiException as e:
            if e.status != 409:
                raise
    found = or_none(lambda: api.read_namespaced_lease(lease_name(uid), home))
    holder = (found.spec.holder_identity if found is not None and found.spec else None) or ""
    return Holder(holder, "")


def release(kube: Kube, home: str, uid: str, workflow_id: str) -> None:
    """Give the instance's backup lease back, if ``workflow_id`` holds it (naming the
    resourceVersion read: a lease another took since stays)."""
    api = _coordination(kube)
    found = or_none(lambda: api.read_namespaced_lease(lease_name(uid), home))
    if found is None or found.spec is None or found.spec.holder_identity != workflow_id:
        return
    version = found.metadata.resource_version if found.metadata else None
    options = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(resource_version=version))
    try:
        api.delete_namespaced_lease(lease_name(uid), home, body=options)
    except k8s.ApiException as e:
        if e.status not in (404, 409):
            raise
