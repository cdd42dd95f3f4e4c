"""The DBBackup resource, and the rules of backups that need no I/O: names and retention.

A DBBackup records one physical backup of a DBInstance: dbi's backup workflow creates
it when the backup starts and writes its status as it goes (Running, then Completed
or Failed). ``dbi.crd`` renders ``crds/dbbackup.yaml`` from these models. A DBBackup
has no owner: it outlives its instance, so a deleted instance can still be restored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from pydantic import Field

from dbi.backup_spec import BackupRetention
from dbi.fields import Section, duration_seconds
from dbi.models import Condition
from dbi.wal import Segment


class BackupPhase(StrEnum):
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"


class Reason(StrEnum):
    """Why a backup was not taken: the DBBackup's status.reason when it failed. A
    failure of one of these types carries dbi's own words, which the DBBackup shows;
    any other error shows only that the backup failed (``workflows.backup``)."""

    INSTANCE_GONE = "InstanceGone"
    STOPPED = "InstanceStopped"  # powerState Stopped: skipped, nothing recorded
    NOT_RUNNING = "InstanceNotRunning"
    NO_STORE = "NoBackupStore"
    NO_PG_BASEBACKUP = "NoPgBasebackup"
    REPLICATION_REFUSED = "ReplicationRefused"
    STORE_FAILED = "BackupStoreFailed"  # a request to the store failed (its words stay out)
    PG_BASEBACKUP_FAILED = "PgBasebackupFailed"
    # pg_verifybackup found a file unlike the manifest's checksum: retried, never kept
    VERIFY_FAILED = "BackupVerifyFailed"
    FAILED = "BackupFailed"  # any other error: its detail is in the worker's log
    RUNNING = "BackupRunning"  # another backup of the instance runs: not taken
    SCRATCH_FULL = "BackupScratchFull"  # more than DBI_BACKUP_SCRATCH_LIMIT to stage
    STALLED = "BackupStalled"  # pg_basebackup wrote nothing for a while: retried


class Trigger(StrEnum):
    SCHEDULE = "Schedule"  # the instance's Temporal Schedule (spec.backup.schedule)
    MANUAL = "Manual"  # `dbi backup NAME`
    DELETE = "Delete"  # the final backup of an instance being deleted (spec.backup.onDelete)


class DBBackupSpec(Section):
    """Which instance the backup is of, and what started it. Written by dbi."""

    instance: str = Field(
        min_length=1, max_length=63, description="Name of the DBInstance, in this namespace."
    )
    trigger: Trigger = Field(
        description="What started the backup: Schedule, Manual, or Delete (the final backup "
        "of spec.backup.onDelete)."
    )


class WalRange(Section):
    """The WAL a restore replays to make the base backup consistent (it is in the backup)."""

    start: str = Field(max_length=32, description="Start LSN, such as 0/2000028.")
    end: str = Field(max_length=32, description="End LSN.")
    timeline: int = Field(ge=1, description="Timeline of the range.")


class StoreRef(Section):
    """Which store a backup is in, so it can be read after its instance is gone: the
    orchestrator's when unset, else a tenant's bucket and the Secret with its keys."""

    url: str = Field(max_length=512, description="s3://<bucket>/<prefix>.")
    endpoint: str | None = Field(default=None, max_length=256, description="S3 endpoint URL.")
    credentials_secret: str = Field(
        max_length=253, description="The Secret, in the DBBackup's namespace, with the keys."
    )


class DBBackupStatus(Section):
    """What the backup workflow observed and did."""

    phase: BackupPhase | None = Field(default=None, description="Running, Completed or Failed.")
    started_at: datetime | None = Field(default=None, description="When the backup started.")
    finished_at: datetime | None = Field(default=None, description="When it completed or failed.")
    size_bytes: int | None = Field(
        default=None, ge=0, description="Bytes in the store.", json_schema_extra={"format": "int64"}
    )
    postgres_version: str | None = Field(
        default=None, max_length=32, description="The server's version, such as 18.6."
    )
    wal: WalRange | None = Field(default=None, description="The WAL range the backup holds.")
    location: str | None = Field(
        default=None, max_length=1024, description="Where the backup's files are."
    )
    store: StoreRef | None = Field(
        default=None,
        description="The tenant's store the backup is in (spec.backup.target); unset: the "
        "orchestrator's.",
    )
    reason: str | None = Field(default=None, max_length=128, description="Why it failed.")
    message: str | None = Field(default=None, max_length=1024, description="What to do.")
    workflow_id: str | None = Field(
        default=None, max_length=512, description="The Temporal workflow that took it."
    )
    instance_uid: str | None = Field(
        default=None,
        alias="instanceUID",
        max_length=64,
        description="The UID of the instance it is of: retention keeps and deletes the "
        "backups of that instance alone, never of another of the same name.",
    )
    system_identifier: str | None = Field(
        default=None,
        max_length=32,
        description="The database system it is of (pg_control_system). With instanceUID "
        "and wal.start it names the archived WAL a restore to a point after it replays: "
        "<namespace>/<instance>/_wal/<instanceUID>/<systemIdentifier>/ from the segment "
        "holding wal.start on. Unset: taken before WAL archiving, it restores only whole.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Ready (Completed), Reconciling (Running) and Stalled (Failed), for kstatus.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(
        default=None, ge=0, json_schema_extra={"format": "int64"}, description="Generation seen."
    )


def backup_name(instance: str, started: datetime) -> str:
    """The DBBackup's name: the instance's and the start time to the second, in UTC
    (``orders-20261201-031500``): sorts by time and stays within 63 characters."""
    return f"{instance}-{started.astimezone(UTC):%Y%m%d-%H%M%S}"


def store_prefix(namespace: str, instance: str, backup: str) -> str:
    """Where a backup's files live in the store, under the store's own prefix."""
    return f"{namespace}/{instance}/{backup}/"


def wal_prefix(namespace: str, instance: str, uid: str, system: str) -> str:
    """Where the WAL of one database system (its identifier: one initdb's lineage) of an
    instance (its UID: a namesake created later, restored from a backup of this one,
    writes WAL of the same names elsewhere) lives in the store; ``_wal`` is no
    DBBackup's name (no underscores). ``system`` empty: the prefix of all of them (an
    S3 key is taken as written: no empty part between two slashes)."""
    under = f"{namespace}/{instance}/_wal/{uid}/"
    return f"{under}{system}/" if system else under


class StoreKind(StrEnum):
    S3 = "s3"
    FILE = "file"


@dataclass(frozen=True)
class StoreLocation:
    """Where backups go: an S3 bucket and key prefix, or a directory."""

    kind: StoreKind
    bucket: str  # S3: the bucket; file: empty
    prefix: str  # S3: keys start with it (no leading /, a trailing one); file: the directory

    @classmethod
    def parse(cls, url: str) -> StoreLocation:
        """Read ``s3://bucket[/prefix]`` or ``file:///directory``; ValueError says why not."""
        scheme, sep, rest = url.partition("://")
        if not sep or scheme not in {k.value for k in StoreKind}:
            raise ValueError("must be s3://<bucket>[/<prefix>] or file:///<directory>")
        if scheme == StoreKind.FILE:
            if not rest.startswith("/") or rest.rstrip("/") == "":
                raise ValueError("must name an absolute directory other than /, file:///...")
            return cls(StoreKind.FILE, "", rest.rstrip("/"))
        bucket, _, prefix = rest.partition("/")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", bucket):
            raise ValueError("must name a bucket of 3 to 63 lower-case letters, digits, . and -")
        prefix = prefix.strip("/")
        return cls(StoreKind.S3, bucket, f"{prefix}/" if prefix else "")

    def url(self) -> str:
        """The location as people write it (no credentials: it holds none), ending in
        ``/``, so that a key appended names a place under it."""
        if self.kind is StoreKind.FILE:
            return f"file://{self.prefix}/"
        return f"s3://{self.bucket}/{self.prefix}"


@dataclass(frozen=True)
class Held:
    """One DBBackup of an instance, as retention sees it."""

    name: str
    phase: BackupPhase | None
    started: datetime | None
    store: StoreRef | None = None  # where its files are; None: the orchestrator's store
    # The segment its start is in and its database system (a Completed one's status):
    # where the archived WAL a restore from it replays begins.
    begins: Segment | None = None
    system: str | None = None


def expired(held: Sequence[Held], retention: BackupRetention, now: datetime) -> list[str]:
    """Return the backups retention deletes, oldest first.

    Completed backups beyond the newest ``count``, or older than ``maxAge``, go; the
    newest completed one always stays (a way back, whatever the settings). A failed
    backup goes once a newer one completed, or beyond the newest ``count`` failed ones
    (a schedule that keeps failing does not pile them up). A running one never goes.
    """
    done = sorted(
        (b for b in held if b.phase is BackupPhase.COMPLETED and b.started is not None),
        key=lambda b: b.started or now,
        reverse=True,
    )
    max_age = timedelta(seconds=duration_seconds(retention.max_age)) if retention.max_age else None
    doomed = [
        b
        for i, b in enumerate(done)
        if i > 0
        and (i >= retention.count or (max_age is not None and now - (b.started or now) > max_age))
    ]
    failed = sorted(
        (b for b in held if b.phase is BackupPhase.FAILED and b.started is not None),
        key=lambda b: b.started or now,
        reverse=True,
    )
    newest = done[0].started if done else None
    doomed += [
        b
        for i, b in enumerate(failed)
        if i >= retention.count or (newest is not None and (b.started or now) < newest)
    ]
    return [b.name for b in sorted(doomed, key=lambda b: b.started or now)]


class BackupRequest(Section):
    """The backup workflow's input: which instance, and what started it."""

    namespace: str
    name: str
    trigger: Trigger = Trigger.SCHEDULE


class Begun(Section):
    """What ``begin_backup`` found: the DBBackup it recorded, and whether to take it."""

    backup: str | None = Field(default=None, description="The DBBackup; None: none recorded.")
    uid: str | None = Field(default=None, description="The instance's UID.")
    reason: str | None = Field(default=None, description="Why not to take it, if so.")
    message: str | None = None


class Taken(Section):
    """What a base backup wrote to the store (also its manifest there, ``MANIFEST``):
    ``files`` are keys under the backup's prefix (its attempt's, such as
    ``2/base.tar.gz``)."""

    backup: str
    size_bytes: int
    postgres_version: str
    wal: WalRange
    location: str
    files: list[str]
    store: StoreRef | None = None  # None: the orchestrator's store
    # Where its instance's archived WAL is (``wal_prefix``); None in backups taken
    # before WAL archiving, which restore only whole.
    instance_uid: str | None = None
    system_identifier: str | None = None

    def key(self, name: str) -> str:
        """The key, under the backup's prefix, of its file ``name`` (``base.tar.gz``)."""
        for key in self.files:
            if key.rsplit("/", 1)[-1] == name:
                return key
        raise KeyError(f"the backup holds no {name}")


class Finish(Section):
    """How a backup ended, for ``finish_backup`` to record."""

    namespace: str
    name: str
    backup: str
    taken: Taken | None = None
    reason: str | None = None
    message: str | None = None
    uid: str | None = None  # the instance's, whose backup lease to give back


class BackupResult(Section):
    """What the backup workflow returns (and ``dbi backup`` prints)."""

    backup: str | None
    phase: BackupPhase | None
    reason: str | None = None
    message: str | None = None
    size_bytes: int | None = None
    pruned: list[str] = Field(default_factory=list)
