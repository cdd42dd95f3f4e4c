"""Names users and scripts rely on; keep them stable (docs/architecture.md, "Names")."""

from __future__ import annotations

import hashlib
from enum import StrEnum

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

GROUP = "dbi.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "DBInstance"
PLURAL = "dbinstances"
SHORT_NAME = "dbi"

TASK_QUEUE = "dbi"


def long_task_queue(task_queue: str) -> str:
    """The task queue of the long activities (``dbi.pipeline.LONG``) of the workflows on
    ``task_queue``: ``<task queue>-long``."""
    return f"{task_queue}-long"


# The workflow's signals, updates and query (the temporal CLI and `dbi` use them).
WAKE = "wake"
RETRY = "retry"
ROTATE_CREDENTIALS = "rotate_credentials"
ROTATE_ADMIN_CREDENTIALS = "rotate_admin_credentials"
FORCE_RESIZE = "force_resize"
PROGRESS = "progress"
FIELD_MANAGER = "dbi-orchestrator"
# The longest suffix of a child's name (<name>-credentials): an instance's name leaves
# room for it within a DNS-1035 label (63 characters), so every child's name is one.
LONGEST_CHILD_SUFFIX = "-credentials"
INSTANCE_NAME_MAX = 63 - len(LONGEST_CHILD_SUFFIX)
# With replicas, a member's root disk: <name>-5-root-<6 hex>.
MEMBER_NAME_MAX = 63 - len("-5-root-000000")
FINALIZER = "dbi.dev/teardown"
INSTANCE_LABEL = "dbi.dev/instance"
# Every child carries its instance's UID here: what makes it the instance's, whether
# or not it has an owner reference (objects deletionPolicy Retain keeps have none).
INSTANCE_UID_ANNOTATION = "dbi.dev/instance-uid"
# On a VirtualMachineImage: the PostgreSQL version it holds (e.g. 16.15.0); preflight
# refuses an image whose major is not spec.version's.
IMAGE_VERSION_LABEL = "dbi.dev/postgresql-version"
# On a DBInstance: the UID of a deleted instance of the same name whose retained
# objects (VM, data disk, Secrets) this one may take over, with their data.
ADOPT_ANNOTATION = "dbi.dev/adopt"
# Day-2 requests written on a DBInstance (by kubectl, Git, a GitOps tool). Each
# *-requested-at is served once per value (any string, a timestamp by convention); the
# value served is published in status.served. dbi.dev/paused "true" holds every action.
RECONCILE_REQUESTED_AT = "dbi.dev/reconcile-requested-at"
RESTART_REQUESTED_AT = "dbi.dev/restart-requested-at"
ROTATE_REQUESTED_AT = "dbi.dev/rotate-requested-at"
ROTATE_ADMIN_REQUESTED_AT = "dbi.dev/rotate-admin-requested-at"
BACKUP_REQUESTED_AT = "dbi.dev/backup-requested-at"
# With spec.instances: a switchover, to the member dbi.dev/switchover-to names (else the
# replica that replayed most).
SWITCHOVER_REQUESTED_AT = "dbi.dev/switchover-requested-at"
SWITCHOVER_TO = "dbi.dev/switchover-to"
PAUSED_ANNOTATION = "dbi.dev/paused"
# On a PersistentVolume dbi set to reclaimPolicy Retain: the instance (namespace/name)
# and the policy the volume had before.
VOLUME_INSTANCE_ANNOTATION = "dbi.dev/instance"
RECLAIM_POLICY_ANNOTATION = "dbi.dev/reclaim-policy-was"


# An instance with spec.instances runs a VM per member (activities.infra.members): the
# first is named as the instance, the others <name>-2 to <name>-5, labelled so, with
# their disks and cloud-init Secret. KubeVirt labels each VM's pods with its name, which
# the Services of the primary select.
MEMBER_LABEL = "dbi.dev/member"
# The Services of the members: <name> plus these (the primary, the replicas, any).
RW_SUFFIX, RO_SUFFIX, ANY_SUFFIX = "-rw", "-ro", "-r"
MEMBER_ROLE_LABEL = "dbi.dev/member-role"
REPLICA = "replica"
VM_NAME_LABEL = "vm.kubevirt.io/name"
# The role replicas clone and stream as; its password is in <name>-replication.
REPLICATION_USER = "dbi_replication"


WORKFLOW_TYPE = "DBInstanceWorkflow"
_WORKFLOW_ID_PREFIX = "dbinstance/"


def service_host(namespace: str, name: str) -> str:
    """The DNS name of an instance's Service ``<name>``: its stable endpoint, which
    clients connect to and its TLS certificate names."""
    return f"{name}.{namespace}.svc"


def workflow_id(namespace: str, name: str) -> str:
    """Return the id of the workflow that converges one DBInstance."""
    return f"{_WORKFLOW_ID_PREFIX}{namespace}/{name}"


def instance_of(workflow: str) -> tuple[str, str] | None:
    """Return the (namespace, name) a workflow id converges; None for another id."""
    if not workflow.startswith(_WORKFLOW_ID_PREFIX):
        return None
    namespace, _, name = workflow.removeprefix(_WORKFLOW_ID_PREFIX).partition("/")
    return (namespace, name) if namespace and name else None


# Backups (dbi.backups): one Temporal Schedule per instance starts DBBackupWorkflow; each
# run records one DBBackup object.
BACKUP_KIND = "DBBackup"
BACKUP_PLURAL = "dbbackups"
BACKUP_WORKFLOW_TYPE = "DBBackupWorkflow"
_BACKUP_PREFIX = "dbbackup/"
# On every DBBackup dbi records: its files leave the store before the object goes,
# however it is deleted (by retention, by hand, with its namespace).
BACKUP_FINALIZER = "dbi.dev/backup-files"
# What gives a deleted DBBackup's files back: one workflow a minute, on a Schedule.
REAPER_WORKFLOW_TYPE = "DBBackupReaperWorkflow"


# Databases users declare on an instance (dbi.databases): one workflow per DBDatabase.
DATABASE_KIND = "DBDatabase"
DATABASE_PLURAL = "dbdatabases"
DATABASE_WORKFLOW_TYPE = "DBDatabaseWorkflow"
# Roles users declare on an instance (dbi.roles): one workflow per DBRole.
ROLE_KIND = "DBRole"
ROLE_PLURAL = "dbroles"
ROLE_WORKFLOW_TYPE = "DBRoleWorkflow"
# On a DBRole's credentials Secret: the DBRole it is of (a deletion wakes it).
ROLE_LABEL = "dbi.dev/role"


# What takes each instance's spooled WAL to its store: one workflow a minute.
WAL_ARCHIVER_WORKFLOW_TYPE = "DBWalArchiverWorkflow"


def wal_archiver_schedule_id(task_queue: str) -> str:
    """The id of the Schedule that archives WAL for the workers of ``task_queue``."""
    return f"dbi-wal-archiver/{task_queue}"


def reaper_schedule_id(task_queue: str) -> str:
    """The id of the Schedule that reaps deleted DBBackups for the workers of
    ``task_queue`` (one per install, where installs share a Temporal namespace)."""
    return f"dbi-backup-reaper/{task_queue}"


def schedule_id(namespace: str, name: str) -> str:
    """Return the id of the Temporal Schedule that backs up one DBInstance."""
    return f"{_BACKUP_PREFIX}{namespace}/{name}"


def final_backup_id(namespace: str, name: str, uid: str) -> str:
    """Return the id of the final backup of one DBInstance (spec.backup.onDelete): one per
    instance, its UID telling it from an earlier instance of the same name."""
    return f"{_BACKUP_PREFIX}{namespace}/{name}-final-{uid}"


def requested_backup_id(namespace: str, name: str, request: str) -> str:
    """Return the id of the backup a dbi.dev/backup-requested-at value asks for: the same
    value is the same backup, started once."""
    digest = hashlib.sha256(request.encode()).hexdigest()[:16]
    return f"{_BACKUP_PREFIX}{namespace}/{name}-requested-{digest}"


RESTORE_TEST_WORKFLOW_TYPE = "DBRestoreTestWorkflow"


def restore_test_schedule_id(namespace: str, name: str) -> str:
    """Return the id of the Temporal Schedule that tests one DBInstance's backups
    restore (spec.backup.restoreTest); its workflows' ids start with it."""
    return f"dbrestoretest/{namespace}/{name}"


UPGRADE_WORKFLOW_TYPE = "DBUpgradeWorkflow"
# Which of an instance's disks a claim is: ``root`` (the OS and PostgreSQL's binaries,
# made from the image) or ``data``.
DISK_LABEL = "dbi.dev/disk"
ROOT_DISK, DATA_DISK = "root", "data"
# On an instance's data disk claim: the PostgreSQL major its data is (set at creation,
# moved by a major upgrade at its end).
DATA_MAJOR_ANNOTATION = "dbi.dev/data-major"


def upgrade_workflow_id(namespace: str, name: str, uid: str, to_major: int, attempt: str) -> str:
    """Return the id of the major upgrade of one DBInstance to ``to_major``: one per
    instance (its UID) and target, and per ``attempt`` (a new one after a failure)."""
    suffix = f"-{attempt}" if attempt else ""
    return f"dbupgrade/{namespace}/{name}-{uid}-to-{to_major}{suffix}"


def backup_workflow_id(namespace: str, name: str) -> str:
    """Return the id the instance's backup workflows start under: the schedule appends
    the time of each run (``-<RFC 3339 time>``); ``dbi backup`` appends ``-manual-<time>``."""
    return f"{_BACKUP_PREFIX}{namespace}/{name}"


class SearchAttributeType(StrEnum):
    KEYWORD = "Keyword"
    BOOL = "Bool"


# The workflow's search attributes: the starter sets the instance's namespace and name,
# the workflow upserts its phase, the step holding it and whether it is Ready.
NAMESPACE_ATTRIBUTE = SearchAttributeKey.for_keyword("DbiNamespace")
NAME_ATTRIBUTE = SearchAttributeKey.for_keyword("DbiName")
PHASE_ATTRIBUTE = SearchAttributeKey.for_keyword("DbiPhase")
STEP_ATTRIBUTE = SearchAttributeKey.for_keyword("DbiStep")
READY_ATTRIBUTE = SearchAttributeKey.for_bool("DbiReady")


def instance_attributes(namespace: str, name: str) -> TypedSearchAttributes:
    """The search attributes a workflow of one DBInstance starts with (its own, and its
    backups'): the instance's namespace and name, for the UI's filters."""
    return TypedSearchAttributes(
        [
            SearchAttributePair(NAMESPACE_ATTRIBUTE, namespace),
            SearchAttributePair(NAME_ATTRIBUTE, name),
        ]
    )


# Registered on the Temporal namespace by the local stack (and by operators in a
# real deployment).
SEARCH_ATTRIBUTES: dict[str, SearchAttributeType] = {
    key.name: SearchAttributeType.BOOL if key is READY_ATTRIBUTE else SearchAttributeType.KEYWORD
    for key in (
        NAMESPACE_ATTRIBUTE,
        NAME_ATTRIBUTE,
        PHASE_ATTRIBUTE,
        STEP_ATTRIBUTE,
        READY_ATTRIBUTE,
    )
}
