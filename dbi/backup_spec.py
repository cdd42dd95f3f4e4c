"""``spec.backup``: when an instance's backups are taken (a Temporal Schedule), which
are kept, and where they go (the orchestrator's store, or a tenant's S3 bucket); and
``spec.restore``: the backup, and the moment, a new instance starts from."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from cronsim import CronSim
from pydantic import AfterValidator, ConfigDict, Field, model_validator

from dbi.fields import (
    CRON_FIELD,
    DNS_SUBDOMAIN,
    DURATION,
    QUANTITY_MAX,
    Section,
    duration_seconds,
    rules,
)

# A backup schedule: five cron fields (minute hour day-of-month month day-of-week, UTC),
# a macro, or @every with a duration of at least 5s (Temporal Schedules read them all).
_SCHEDULE = (
    rf"^(@every ([0-9]+(s|m|h))+|@(hourly|daily|weekly|monthly|yearly)|{CRON_FIELD}"
    rf"( {CRON_FIELD}){{4}})$"
)
EVERY_MIN_SECONDS = 5
# The macros a schedule may be, as the cron fields Temporal reads them as.
MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
}


def interval_seconds(schedule: str, now: datetime) -> float:
    """The time between the next two backups of ``schedule`` after ``now`` (UTC)."""
    if schedule.startswith("@every "):
        return duration_seconds(schedule[7:])
    fired = CronSim(MACROS.get(schedule, schedule), now)
    first = next(fired)
    return (next(fired) - first).total_seconds()


# spec.backup.archiveTimeout: PostgreSQL's archive_timeout, within these bounds; unset,
# the guest's (dbi-archive.conf) is in force.
ARCHIVE_TIMEOUT_MIN = 30
ARCHIVE_TIMEOUT_MAX = 24 * 3600
ARCHIVE_TIMEOUT_DEFAULT = 300


def _archive_timeout(value: str | None) -> str | None:
    if value is not None and not (
        ARCHIVE_TIMEOUT_MIN <= duration_seconds(value) <= ARCHIVE_TIMEOUT_MAX
    ):
        raise ValueError(f"archiveTimeout must be from {ARCHIVE_TIMEOUT_MIN}s to 24h")
    return value


_EVERY_RULE = rules(
    (
        "!self.startsWith('@every ') || duration(self.substring(7)) >= "
        f"duration('{EVERY_MIN_SECONDS}s')",
        f"@every must be at least {EVERY_MIN_SECONDS}s",
    )
)


def _schedule(value: str) -> str:
    if value.startswith("@every ") and duration_seconds(value[7:]) < EVERY_MIN_SECONDS:
        raise ValueError(f"@every must be at least {EVERY_MIN_SECONDS}s")
    return value


class BackupRetention(Section):
    """Which backups are kept: the newest ``count``, none older than ``maxAge``, and
    always the newest one that completed."""

    count: int = Field(
        default=7,
        ge=1,
        le=1000,
        description="How many completed backups to keep, newest first (1 to 1000).",
    )
    max_age: str | None = Field(
        default=None,
        max_length=QUANTITY_MAX,
        pattern=DURATION.pattern,
        description="Delete completed backups older than this duration (such as 168h), "
        "beyond the newest one, which is always kept. Unset: by count only.",
    )


_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class S3Target(Section):
    """An S3-compatible bucket of the tenant's, with its keys in a Secret of theirs."""

    bucket: str = Field(pattern=_BUCKET, max_length=63, description="The bucket.")
    prefix: str = Field(
        default="",
        max_length=256,
        pattern=r"^[A-Za-z0-9!_.*'()/-]*$",
        description="Where in the bucket the instance's backups go (keys start with it).",
    )
    endpoint: str | None = Field(
        default=None,
        max_length=256,
        pattern=r"^https?://[^/\s]+/?$",
        description="Base URL of an S3-compatible endpoint, such as https://minio.example:9000 "
        "(http:// only on a trusted network). Unset: AWS S3.",
    )
    credentials_secret: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="A Secret in this namespace with the keys AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (dbi reads them; the VM never sees them).",
    )


class BackupTarget(Section):
    """Where the instance's backups go instead of the orchestrator's store."""

    s3: S3Target = Field(description="An S3-compatible bucket.")


# spec.backup.restoreTest.timeout: how long the throwaway instance has to go Ready.
RESTORE_TEST_TIMEOUT_MIN = 600
RESTORE_TEST_TIMEOUT_MAX = 48 * 3600


def _restore_test_timeout(value: str) -> str:
    if not RESTORE_TEST_TIMEOUT_MIN <= duration_seconds(value) <= RESTORE_TEST_TIMEOUT_MAX:
        raise ValueError("timeout must be from 10m to 48h")
    return value


class RestoreTest(Section):
    """A restore of the newest backup and the WAL archived since into a throwaway
    instance, on a Temporal Schedule; the instance's status says how the last one went
    (condition RestoreTestSucceeded)."""

    schedule: Annotated[str, AfterValidator(_schedule)] = Field(
        default="@weekly",
        max_length=QUANTITY_MAX * 2,
        pattern=_SCHEDULE,
        description="When to test, in UTC, as spec.backup.schedule is written; each run "
        "starts within a tenth of the interval (at most an hour) after it, so that a "
        "fleet's tests do not all start at once.",
        json_schema_extra=_EVERY_RULE,
    )
    timeout: Annotated[str, AfterValidator(_restore_test_timeout)] = Field(
        default="2h",
        max_length=QUANTITY_MAX,
        pattern=DURATION.pattern,
        description="How long the throwaway instance has to go Ready before the test "
        "fails (10m to 48h).",
        json_schema_extra=rules(
            (
                "duration(self) >= duration('10m') && duration(self) <= duration('48h')",
                "timeout must be from 10m to 48h",
            )
        ),
    )


class Backup(Section):
    """Physical backups of the instance on a Temporal Schedule, into the orchestrator's
    backup store (or ``target``); each one is a DBBackup object."""

    schedule: Annotated[str, AfterValidator(_schedule)] = Field(
        max_length=QUANTITY_MAX * 2,
        pattern=_SCHEDULE,
        description="When to take a backup, in UTC: five cron fields (minute hour "
        "day-of-month month day-of-week, such as '0 3 * * *'), a macro such as @daily, or "
        f"@every with a duration of at least {EVERY_MIN_SECONDS}s (such as @every 6h).",
        json_schema_extra=_EVERY_RULE,
    )
    retention: BackupRetention = Field(
        default=BackupRetention(), description="Which backups are kept."
    )
    target: BackupTarget | None = Field(
        default=None,
        description="Where the backups go. Unset: the orchestrator's backup store "
        "(DBI_BACKUP_STORE).",
    )
    suspended: bool = Field(
        default=False,
        description="Pause the schedule (backups already taken stay; `dbi backup` still "
        "takes one).",
    )
    on_delete: bool = Field(
        default=False,
        description="Take a final backup when the instance is deleted under deletionPolicy "
        "Delete, before its disks go; the deletion waits for it, and stalls if it fails.",
    )
    archive_timeout: Annotated[str | None, AfterValidator(_archive_timeout)] = Field(
        default=None,
        max_length=QUANTITY_MAX,
        pattern=DURATION.pattern,
        description="The longest a committed write waits before its WAL segment is "
        "completed and archived, however quiet the database (PostgreSQL's "
        "archive_timeout, applied with a reload): the recovery point's bound, plus up to "
        f"a minute. From {ARCHIVE_TIMEOUT_MIN}s to 24h; unset: "
        f"{ARCHIVE_TIMEOUT_DEFAULT // 60}m. Each timeout on a database that wrote "
        "anything archives one more segment.",
        json_schema_extra=rules(
            (
                f"duration(self) >= duration('{ARCHIVE_TIMEOUT_MIN}s') && "
                f"duration(self) <= duration('{ARCHIVE_TIMEOUT_MAX // 3600}h')",
                f"archiveTimeout must be from {ARCHIVE_TIMEOUT_MIN}s to 24h",
            )
        ),
    )

    restore_test: RestoreTest | None = Field(
        default=None,
        description="Test that the backups restore: the newest one and the WAL archived "
        "since, into a throwaway instance of the same spec in this namespace (a VM and "
        "disks as large, for as long as the test takes), deleted after. Unset: no tests.",
    )

    @staticmethod
    def parameters(backup: Backup | None) -> dict[str, str]:
        """The PostgreSQL settings ``spec.backup`` (None: unset) asks for, as the settings
        step writes them beside spec.postgresql.parameters."""
        if backup is None or backup.archive_timeout is None:
            return {}
        return {"archive_timeout": f"{int(duration_seconds(backup.archive_timeout))}s"}


def _moment(value: str | None) -> str | None:
    """An RFC 3339 time with its offset, as written."""
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is not an RFC 3339 time (2026-12-07T10:15:00Z)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{value!r} has no offset; write it in UTC (Z) or with one")
    return value


def moment_of(value: str) -> datetime:
    """``Restore.point_in_time`` as a time, in UTC."""
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


class RestoreSource(Section):
    """The backup a new instance starts from: one named, or the newest one of an
    instance before spec.restore.pointInTime."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            (
                "has(self.backup) != has(self.instance)",
                "name either a backup or an instance, not both",
            )
        )
    )

    backup: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN,
        description="Name of a Completed DBBackup in this namespace, of spec.version's "
        "major (dbi backups NAME lists them).",
    )
    instance: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS_SUBDOMAIN,
        description="Name of an instance of this namespace (it may be deleted since) whose "
        "backups and archived WAL to restore: dbi picks its newest Completed backup that "
        "ended before pointInTime (or its newest), and replays its WAL up to then.",
    )

    @model_validator(mode="after")
    def _one(self) -> RestoreSource:
        if (self.backup is None) == (self.instance is None):
            raise ValueError("name either a backup or an instance, not both")
        return self


LSN = r"^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$"


class Restore(Section):
    """Create the instance's data from a backup instead of an empty database, and
    replay archived WAL up to a moment or a WAL location."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            (
                "!(has(self.pointInTime) && has(self.lsn))",
                "set pointInTime or lsn, not both",
            ),
            (
                "!(has(self.immediate) && self.immediate && "
                "(has(self.pointInTime) || has(self.lsn)))",
                "immediate takes no pointInTime or lsn",
            ),
        )
    )

    from_: RestoreSource = Field(alias="from", description="The backup to start from.")
    point_in_time: Annotated[str | None, AfterValidator(_moment)] = Field(
        default=None,
        max_length=64,
        json_schema_extra={"format": "date-time"},
        description="Recover to this moment (RFC 3339): the backup's WAL, then the "
        "archived WAL up to it, on a new timeline. Unset: the backup alone (from.backup), "
        "or everything archived (from.instance).",
    )
    lsn: str | None = Field(
        default=None,
        max_length=17,
        pattern=LSN,
        description="Instead of pointInTime: recover up to and including this WAL location "
        "(pg_current_wal_lsn's form, such as 0/3000060), on a new timeline. "
        "dbi picks the newest Completed backup that ended before it, and refuses one past "
        "the archived WAL.",
    )

    immediate: bool = Field(
        default=False,
        description="Instead of a target: recover only to the backup's own end (the "
        "first consistent moment; PostgreSQL's recovery_target 'immediate'), from the "
        "named backup or the newest Completed one of from.instance, and replay no "
        "archived WAL after it.",
    )

    @model_validator(mode="after")
    def _one_target(self) -> Restore:
        if self.point_in_time is not None and self.lsn is not None:
            raise ValueError("set pointInTime or lsn, not both")
        if self.immediate and (self.point_in_time is not None or self.lsn is not None):
            raise ValueError("immediate takes no pointInTime or lsn")
        return self
