"""The DBInstance's spec as pydantic models: what users declare.

With ``dbi.models`` (the resource and its status), the single source of the resource's
schema: ``dbi.crd`` renders ``crds/dbinstance.yaml`` from them (descriptions, defaults,
enums, bounds, and the CEL rules the API server enforces), and a test keeps the two
identical. Field names are camelCase on the wire, snake_case in Python.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from cronsim import CronSim, CronSimError
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    model_validator,
)
from pydantic.alias_generators import to_camel

from dbi.quantity import parse_quantity

SupportedVersion = Literal[16, 17, 18]
SUPPORTED_VERSIONS: tuple[int, ...] = get_args(SupportedVersion)

_VERSIONS = ", ".join(map(str, SUPPORTED_VERSIONS))


def _version_number(value: Any) -> Any:
    """A version written as a string ("18", as many operators accept) is the number."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def _int_or_string_version(schema: dict[str, Any]) -> None:
    """The CRD takes spec.version as a number or a string, checked by CEL rules whose
    messages name the supported versions (an enum's type error would contradict itself)."""
    schema.pop("type", None)
    schema.pop("enum", None)
    schema["x-kubernetes-int-or-string"] = True
    allowed = ", ".join(f"'{v}'" for v in SUPPORTED_VERSIONS)
    schema["x-kubernetes-validations"] = [
        {
            "rule": f"string(self) in [{allowed}]",
            "message": f"must be one of {_VERSIONS} (a number or a string)",
        },
        {
            "rule": "int(string(self)) >= int(string(oldSelf))",
            "message": "may go up (a major upgrade), never down",
        },
    ]


MEBIBYTE = 2**20


def _ceil(value: Decimal, unit: int) -> int:
    """``value`` in ``unit``s, rounded up."""
    return math.ceil(value / unit)


# CEL cost estimation needs a bound on every string it looks at.
_QUANTITY_MAX = 32
_NAME_MAX = 63


def _rules(*rules: tuple[str, str]) -> dict[str, Any]:
    """Return CEL validation rules (rule, message) in the CRD's extension field."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


def _between(minimum: str, maximum: str) -> AfterValidator:
    """Return a validator: a Kubernetes quantity from ``minimum`` to ``maximum``."""

    def check(value: str) -> str:
        try:
            ok = parse_quantity(minimum) <= parse_quantity(value) <= parse_quantity(maximum)
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(_between_message(minimum, maximum))
        return value

    return AfterValidator(check)


def _between_message(minimum: str, maximum: str) -> str:
    return f"must be a quantity from {minimum} to {maximum}, such as 4Gi"


def _between_rule(minimum: str, maximum: str) -> dict[str, Any]:
    rule = (
        f"isQuantity(self) && quantity(self).compareTo(quantity('{minimum}')) >= 0"
        f" && quantity(self).compareTo(quantity('{maximum}')) <= 0"
    )
    return _rules((rule, _between_message(minimum, maximum)))


# The bounds of what a VM of this platform can be given: KubeVirt guests of up to 1Ti of
# memory, and data disks of up to 64Ti (Longhorn's and most CSI drivers' largest
# volume). Within them, a VM no node can hold is Pending (Unschedulable), not refused.
MEMORY_MIN, MEMORY_MAX = "512Mi", "1Ti"
STORAGE_MIN, STORAGE_MAX = "1Gi", "64Ti"

MemoryQuantity = Annotated[
    str,
    Field(max_length=_QUANTITY_MAX, json_schema_extra=_between_rule(MEMORY_MIN, MEMORY_MAX)),
    _between(MEMORY_MIN, MEMORY_MAX),
]
StorageQuantity = Annotated[
    str,
    Field(max_length=_QUANTITY_MAX, json_schema_extra=_between_rule(STORAGE_MIN, STORAGE_MAX)),
    _between(STORAGE_MIN, STORAGE_MAX),
]

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def duration_seconds(value: str) -> float:
    """Return the seconds of a Go-style duration such as ``5m`` or ``1h30m``."""
    if not _DURATION.match(value):
        raise ValueError(f"{value!r} is not a duration, such as 30s, 5m or 1h")
    return sum(
        int(n) * _DURATION_UNITS[unit] for n, unit in re.findall(r"([0-9]+)(ms|s|m|h)", value)
    )


def _interval(value: str) -> str:
    if not 10 <= duration_seconds(value) <= 86400:
        raise ValueError("must be between 10s and 24h")
    return value


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_enum_values=False,
    )


class PowerState(StrEnum):
    RUNNING = "Running"
    STOPPED = "Stopped"


class ResizePolicy(StrEnum):
    RESTART = "Restart"
    DEFERRED = "Deferred"


class DeletionPolicy(StrEnum):
    DELETE = "Delete"
    RETAIN = "Retain"


class Resources(_Model):
    """Compute and storage of the instance's VM."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "!isQuantity(self.storage) || !isQuantity(oldSelf.storage)"
                " || quantity(self.storage).compareTo(quantity(oldSelf.storage)) >= 0",
                "storage may grow but never shrink",
            )
        )
    )

    cpu: int = Field(
        ge=1,
        le=128,
        description="Virtual CPU cores of the VM (1 to 128). A change within the VM's "
        "maximum sockets applies live; otherwise it needs a restart (see resizePolicy).",
    )
    memory: MemoryQuantity = Field(
        description="Memory of the VM, as a Kubernetes quantity from 512Mi to 1Ti (for "
        "example 4Gi). PostgreSQL's memory settings follow it.",
    )
    storage: StorageQuantity = Field(
        description="Size of the data disk, as a Kubernetes quantity from 1Gi to 64Ti "
        "(for example 20Gi). It may grow (the disk is expanded online) but never shrink.",
    )

    def storage_bytes(self) -> Decimal:
        return parse_quantity(self.storage)

    def memory_bytes(self) -> Decimal:
        """The memory the VM gets: the quantity rounded up to a whole MiB, the unit of a
        VM's guest memory (``1000M`` is 953.67 MiB: the VM gets 954 MiB, never less than
        asked). Every comparison with what the VM has uses this figure."""
        return Decimal(_ceil(parse_quantity(self.memory), MEBIBYTE) * MEBIBYTE)

    def memory_mebibytes(self) -> int:
        return int(self.memory_bytes() // MEBIBYTE)


_IDENTIFIER = r"^[a-z_][a-z0-9_]*$"
_NOT_RESERVED = (
    "!self.startsWith('pg_') && self != 'postgres' && self != 'dbi_admin'",
    "must not start with pg_ nor be postgres or dbi_admin (reserved)",
)


def _not_reserved(value: str) -> str:
    if value.startswith("pg_") or value in {"postgres", "dbi_admin"}:
        raise ValueError("must not start with pg_ nor be postgres or dbi_admin (reserved)")
    return value


# Constraints come before the validator: pydantic puts only those into the schema.
Identifier = Annotated[
    str,
    Field(
        min_length=1,
        max_length=_NAME_MAX,
        pattern=_IDENTIFIER,
        json_schema_extra=_rules(
            _NOT_RESERVED, ("self == oldSelf", "is immutable once the instance exists")
        ),
    ),
    AfterValidator(_not_reserved),
]


# A Secret's name: a DNS-1123 subdomain.
_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class Credentials(_Model):
    """The application role and database users connect with."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "has(self.secretName) == has(oldSelf.secretName)"
                " && (!has(self.secretName) || self.secretName == oldSelf.secretName)",
                "secretName is immutable once the instance exists",
            )
        )
    )

    username: Identifier = Field(
        default="app",
        description="Name of the application role (lower-case letters, digits, _). "
        "Immutable. Its password is generated and kept in the credentials Secret.",
    )
    database: Identifier = Field(
        default="app",
        description="Name of the database the application role owns. Immutable.",
    )
    secret_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="Name of the credentials Secret apps read (username, password, host, "
        "port, dbname, uri, jdbc-uri, pgpass: CloudNativePG's keys). Default: "
        "<name>-credentials. Immutable.",
    )


class Monitoring(_Model):
    """Metrics of the instance for Prometheus."""

    enabled: bool = Field(
        default=True,
        description="Expose the PostgreSQL exporter through a Service and a "
        "ServiceMonitor (Prometheus Operator).",
    )


# A backup schedule: five cron fields (minute hour day-of-month month day-of-week, UTC),
# a macro, or @every with a duration of at least 5s (Temporal Schedules read them all).
_CRON_FIELD = r"[-0-9A-Za-z*/,?]+"
_SCHEDULE = (
    rf"^(@every ([0-9]+(s|m|h))+|@(hourly|daily|weekly|monthly|yearly)|{_CRON_FIELD}"
    rf"( {_CRON_FIELD}){{4}})$"
)
EVERY_MIN_SECONDS = 5


def _schedule(value: str) -> str:
    if value.startswith("@every ") and duration_seconds(value[7:]) < EVERY_MIN_SECONDS:
        raise ValueError(f"@every must be at least {EVERY_MIN_SECONDS}s")
    return value


class BackupRetention(_Model):
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
        max_length=_QUANTITY_MAX,
        pattern=_DURATION.pattern,
        description="Delete completed backups older than this duration (such as 168h), "
        "beyond the newest one, which is always kept. Unset: by count only.",
    )


_BUCKET = r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"


class S3Target(_Model):
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
        pattern=_DNS_SUBDOMAIN,
        description="A Secret in this namespace with the keys AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY (dbi reads them; the VM never sees them).",
    )


class BackupTarget(_Model):
    """Where the instance's backups go instead of the orchestrator's store."""

    s3: S3Target = Field(description="An S3-compatible bucket.")


class Backup(_Model):
    """Physical backups of the instance on a Temporal Schedule, into the orchestrator's
    backup store (or ``target``); each one is a DBBackup object."""

    schedule: Annotated[str, AfterValidator(_schedule)] = Field(
        max_length=_QUANTITY_MAX * 2,
        pattern=_SCHEDULE,
        description="When to take a backup, in UTC: five cron fields (minute hour "
        "day-of-month month day-of-week, such as '0 3 * * *'), a macro such as @daily, or "
        f"@every with a duration of at least {EVERY_MIN_SECONDS}s (such as @every 6h).",
        json_schema_extra=_rules(
            (
                "!self.startsWith('@every ') || duration(self.substring(7)) >= "
                f"duration('{EVERY_MIN_SECONDS}s')",
                f"@every must be at least {EVERY_MIN_SECONDS}s",
            )
        ),
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


# A window's openings: five cron fields (minute hour day-of-month month day-of-week, UTC).
_WINDOW_CRON = rf"^{_CRON_FIELD}( {_CRON_FIELD}){{4}}$"
WINDOW_MAX_HOURS = 168


def _window_cron(value: str | None) -> str | None:
    """Five cron fields that fire (cronsim reads them as the worker will)."""
    if value is None:
        return None
    try:
        next(CronSim(value, datetime(2000, 1, 1, tzinfo=UTC)))
    except (CronSimError, StopIteration) as e:
        raise ValueError(f"{value!r} is not a cron expression: {e}") from None
    return value


def _window_length(value: str) -> str:
    if not 60 <= duration_seconds(value) <= WINDOW_MAX_HOURS * 3600:
        raise ValueError(f"must be between 1m and {WINDOW_MAX_HOURS}h")
    return value


class Weekday(StrEnum):
    MON = "Mon"
    TUE = "Tue"
    WED = "Wed"
    THU = "Thu"
    FRI = "Fri"
    SAT = "Sat"
    SUN = "Sun"


class MaintenanceWindow(_Model):
    """When the orchestrator may restart the VM for a planned change, in UTC: from
    ``start`` on ``days`` (or at the times of ``schedule``) for ``duration``."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "has(self.start) != has(self.schedule)",
                "set exactly one of start (with days) or schedule",
            ),
            ("!has(self.days) || has(self.start)", "days go with start"),
        )
    )

    days: list[Weekday] | None = Field(
        default=None,
        min_length=1,
        max_length=7,
        description="The days it opens on (Mon to Sun, UTC). Unset: every day.",
    )
    start: str | None = Field(
        default=None,
        max_length=5,
        pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$",
        description="When it opens, as HH:MM in UTC, such as 02:00.",
    )
    schedule: Annotated[str | None, AfterValidator(_window_cron)] = Field(
        default=None,
        max_length=_QUANTITY_MAX * 2,
        pattern=_WINDOW_CRON,
        description="When it opens, as five cron fields in UTC (minute hour day-of-month "
        "month day-of-week), such as '0 2 * * 6' (Saturdays at 02:00); instead of start "
        "and days.",
    )
    duration: Annotated[str, AfterValidator(_window_length)] = Field(
        max_length=_QUANTITY_MAX,
        pattern=_DURATION.pattern,
        description=f"How long it stays open, between 1m and {WINDOW_MAX_HOURS}h, such as 4h.",
        json_schema_extra=_rules(
            (
                "duration(self) >= duration('1m') && "
                f"duration(self) <= duration('{WINDOW_MAX_HOURS}h')",
                f"must be between 1m and {WINDOW_MAX_HOURS}h",
            )
        ),
    )

    @model_validator(mode="after")
    def _one_form(self) -> MaintenanceWindow:
        if (self.start is None) == (self.schedule is None):
            raise ValueError("set exactly one of start (with days) or schedule")
        if self.days is not None and self.start is None:
            raise ValueError("days go with start")
        return self


class Maintenance(_Model):
    """When planned disruption may happen."""

    window: MaintenanceWindow | None = Field(
        default=None,
        description="A restart a resize or a repave needs waits for this window (a "
        "durable timer); dbi resize --force and dbi.dev/restart-requested-at apply it at "
        "once. Unset: at once.",
    )


class RestoreSource(_Model):
    """The backup a new instance starts from."""

    backup: str = Field(
        min_length=1,
        max_length=253,
        pattern=_DNS_SUBDOMAIN,
        description="Name of a Completed DBBackup in this namespace, of spec.version's "
        "major (dbi backups NAME lists them).",
    )


class Restore(_Model):
    """Create the instance's data from a backup instead of an empty database."""

    from_: RestoreSource = Field(alias="from", description="The backup to start from.")


class DBInstanceSpec(_Model):
    """The desired state of a managed PostgreSQL instance."""

    model_config = ConfigDict(
        json_schema_extra=_rules(
            (
                "has(self.restore) == has(oldSelf.restore)"
                " && (!has(self.restore) || self.restore == oldSelf.restore)",
                "restore is set when the instance is created, and never changed",
            )
        )
    )

    version: Annotated[SupportedVersion, BeforeValidator(_version_number)] = Field(
        description='PostgreSQL major version, as a number or a string (18 or "18"). '
        "It may go up (a major upgrade with pg_upgrade, the old data kept until the new "
        f"server answers), never down. Supported: {_VERSIONS}.",
        json_schema_extra=_int_or_string_version,
    )
    image: str | None = Field(
        default=None,
        max_length=2 * _NAME_MAX + 1,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="Harvester VirtualMachineImage to boot, as namespace/name. When "
        "unset, the orchestrator's configured image for the version is used. A change "
        "repaves: the VM restarts on a root disk made from the new image and keeps its "
        "data disk. An image labelled dbi.dev/postgresql-version must hold spec.version's "
        "major.",
    )
    resources: Resources = Field(description="CPU, memory and storage of the VM.")
    power_state: PowerState = Field(
        default=PowerState.RUNNING,
        description="Running keeps the VM and PostgreSQL up; Stopped shuts the VM down "
        "and keeps its disk.",
    )
    resize_policy: ResizePolicy = Field(
        default=ResizePolicy.RESTART,
        description="How a CPU or memory change that needs a VM restart is applied: "
        "Restart restarts the VM at once; Deferred waits until a force_resize update of "
        "the instance's workflow asks for the restart. Changes that can be applied live "
        "always are.",
    )
    credentials: Credentials = Field(
        default=Credentials(),
        description="The application role and database.",
    )
    monitoring: Monitoring = Field(default=Monitoring(), description="Metrics for Prometheus.")
    health_check_interval: Annotated[str, AfterValidator(_interval)] = Field(
        default="5m",
        max_length=_QUANTITY_MAX,
        pattern=_DURATION.pattern,
        description="How often a Ready instance is re-checked (drift and health), as a "
        "duration between 10s and 24h, such as 30s, 5m or 1h.",
        json_schema_extra=_rules(
            (
                "duration(self) >= duration('10s') && duration(self) <= duration('24h')",
                "must be between 10s and 24h",
            )
        ),
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.DELETE,
        description="What happens to the VM and its disks when the instance is deleted: "
        "Delete removes them; Retain keeps them, released from the instance.",
    )
    backup: Backup | None = Field(
        default=None,
        description="Scheduled physical backups (pg_basebackup and its WAL) into the "
        "orchestrator's backup store. Unset: no schedule (`dbi backup` still takes one).",
    )
    maintenance: Maintenance | None = Field(
        default=None,
        description="When a VM restart for a planned change may happen. Unset: at once.",
    )
    restore: Restore | None = Field(
        default=None,
        description="Start the new instance's data from a backup (a DBBackup of this "
        "namespace) instead of an empty database. Set at creation only; immutable.",
    )
