"""The DBInstance's spec as pydantic models: what users declare.

With ``dbi.models`` (the resource and its status), the single source of the resource's
schema: ``dbi.crd`` renders ``crds/dbinstance.yaml`` from them (descriptions, defaults,
enums, bounds, and the CEL rules the API server enforces), and a test keeps the two
identical. Field names are camelCase on the wire, snake_case in Python.
"""

from __future__ import annotations

import math
from decimal import Decimal
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field

from dbi.backup_spec import Backup, Restore
from dbi.fields import (
    DNS_SUBDOMAIN,
    DURATION,
    NAME_MAX,
    QUANTITY_MAX,
    Section,
    duration_seconds,
    rules,
)
from dbi.maintenance import Maintenance
from dbi.parameters import PostgreSQL
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
    return rules((rule, _between_message(minimum, maximum)))


# The bounds of what a VM of this platform can be given: KubeVirt guests of up to 1Ti of
# memory, and data disks of up to 64Ti (Longhorn's and most CSI drivers' largest
# volume). Within them, a VM no node can hold is Pending (Unschedulable), not refused.
MEMORY_MIN, MEMORY_MAX = "512Mi", "1Ti"
STORAGE_MIN, STORAGE_MAX = "1Gi", "64Ti"

MemoryQuantity = Annotated[
    str,
    Field(max_length=QUANTITY_MAX, json_schema_extra=_between_rule(MEMORY_MIN, MEMORY_MAX)),
    _between(MEMORY_MIN, MEMORY_MAX),
]
StorageQuantity = Annotated[
    str,
    Field(max_length=QUANTITY_MAX, json_schema_extra=_between_rule(STORAGE_MIN, STORAGE_MAX)),
    _between(STORAGE_MIN, STORAGE_MAX),
]


def _interval(value: str) -> str:
    if not 10 <= duration_seconds(value) <= 86400:
        raise ValueError("must be between 10s and 24h")
    return value


class PowerState(StrEnum):
    RUNNING = "Running"
    STOPPED = "Stopped"


class ResizePolicy(StrEnum):
    RESTART = "Restart"
    DEFERRED = "Deferred"


class DeletionPolicy(StrEnum):
    DELETE = "Delete"
    RETAIN = "Retain"


class Resources(Section):
    """Compute and storage of the instance's VM."""

    model_config = ConfigDict(
        json_schema_extra=rules(
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
        max_length=NAME_MAX,
        pattern=_IDENTIFIER,
        json_schema_extra=rules(
            _NOT_RESERVED, ("self == oldSelf", "is immutable once the instance exists")
        ),
    ),
    AfterValidator(_not_reserved),
]


class Credentials(Section):
    """The application role and database users connect with."""

    model_config = ConfigDict(
        json_schema_extra=rules(
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
        pattern=DNS_SUBDOMAIN,
        description="Name of the credentials Secret apps read (username, password, host, "
        "port, dbname, uri, jdbc-uri, pgpass: CloudNativePG's keys). Default: "
        "<name>-credentials. Immutable.",
    )


class Monitoring(Section):
    """Metrics of the instance for Prometheus."""

    enabled: bool = Field(
        default=True,
        description="Expose the PostgreSQL exporter through a Service and a "
        "ServiceMonitor (Prometheus Operator).",
    )


MEMBERS_MAX = 5  # spec.instances


class DBInstanceSpec(Section):
    """The desired state of a managed PostgreSQL instance."""

    model_config = ConfigDict(
        json_schema_extra=rules(
            (
                "has(self.restore) == has(oldSelf.restore)"
                " && (!has(self.restore) || self.restore == oldSelf.restore)",
                "restore is set when the instance is created, and never changed",
            ),
            (
                "!has(oldSelf.instances) || has(self.instances)",
                "instances, once set, stays set: set it to 1 to remove the replicas",
            ),
            (
                "!has(self.instances) || self.instances == 1"
                " || string(self.version) == string(oldSelf.version)",
                "version cannot change while instances is above 1: set instances to 1 first",
            ),
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
        max_length=2 * NAME_MAX + 1,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-.a-z0-9]*[a-z0-9])?$",
        description="Harvester VirtualMachineImage to boot, as namespace/name. When "
        "unset, the orchestrator's configured image for the version is used. A change "
        "repaves: the VM restarts on a root disk made from the new image and keeps its "
        "data disk. An image labelled dbi.dev/postgresql-version must hold spec.version's "
        "major.",
    )
    resources: Resources = Field(description="CPU, memory and storage of the VM.")
    instances: int | None = Field(  # no default (see postgresql)
        default=None,
        ge=1,
        le=MEMBERS_MAX,
        description="Members (VMs): a primary and streaming replicas, each with its own "
        f"data disk, cloned from the primary over verified TLS. 1 to {MEMBERS_MAX}; unset: 1.",
    )
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
    # No default: a defaulted object would reach every stored instance, and a worker of a
    # release before it could read none of them (tests/crds/test_defaults.py).
    postgresql: PostgreSQL | None = Field(default=None, description="PostgreSQL's settings.")
    health_check_interval: Annotated[str, AfterValidator(_interval)] = Field(
        default="5m",
        max_length=QUANTITY_MAX,
        pattern=DURATION.pattern,
        description="How often a Ready instance is re-checked (drift and health), as a "
        "duration between 10s and 24h, such as 30s, 5m or 1h.",
        json_schema_extra=rules(
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
