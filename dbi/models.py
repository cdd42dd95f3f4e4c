"""The DBInstance resource as pydantic models: the resource, and its status.

With ``dbi.spec`` (what users declare), the single source of the resource's schema:
``dbi.crd`` renders ``crds/dbinstance.yaml`` from them, and a test keeps the two
identical. Field names are camelCase on the wire, snake_case in Python.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import ConfigDict, Field

from dbi import names
from dbi.fields import Section
from dbi.spec import DBInstanceSpec, PowerState


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(Section):
    """One aspect of the instance's state (the shape of metav1.Condition)."""

    type: str = Field(
        max_length=316,
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        description="Type of the condition, in CamelCase (for example Ready).",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        description="Why the condition is as it is: a CamelCase identifier.",
    )
    message: str = Field(default="", max_length=32768, description="A human-readable explanation.")
    last_transition_time: datetime = Field(
        description="When the status last changed.",
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The metadata.generation the condition was set for.",
        json_schema_extra={"format": "int64"},
    )


class Phase(StrEnum):
    PROVISIONING = "Provisioning"
    STARTING = "Starting"
    RUNNING = "Running"
    STOPPING = "Stopping"
    STOPPED = "Stopped"
    RESIZING = "Resizing"
    UPGRADING = "Upgrading"
    DEGRADED = "Degraded"
    FAILED = "Failed"
    DELETING = "Deleting"
    PAUSED = "Paused"


class Endpoint(Section):
    """Where clients connect."""

    host: str = Field(
        description="The instance's Service, <name>.<namespace>.svc: stable across VM "
        "restarts, which change the VM's address (status.observed.address)."
    )
    port: int = Field(ge=1, le=65535, description="PostgreSQL's port.")


class Observed(Section):
    """What the last pass observed of the VM and the database."""

    cpu: int | None = Field(default=None, description="CPU cores the VM runs with.")
    memory: str | None = Field(default=None, description="Memory the VM runs with.")
    storage: str | None = Field(default=None, description="Capacity of the data disk.")
    power_state: PowerState | None = Field(default=None, description="Running or Stopped.")
    postgres_version: str | None = Field(
        default=None, description="Server version PostgreSQL reports."
    )
    image: str | None = Field(
        default=None,
        description="The VirtualMachineImage (namespace/name) the VM's root disk was made from.",
    )
    address: str | None = Field(
        default=None,
        description="The VM's address now (it changes when the VM restarts; clients use "
        "status.endpoint).",
    )
    parameters: list[str] | None = Field(
        default=None,
        description="The spec.postgresql.parameters written (ALTER SYSTEM), by name.",
    )
    pending_restart: list[str] | None = Field(
        default=None,
        description="Settings whose new value takes effect at the VM's next restart.",
    )


class MemberRole(StrEnum):
    PRIMARY = "Primary"
    REPLICA = "Replica"


class Member(Section):
    """One member (VM) of an instance with spec.instances, as the last pass saw it."""

    name: str = Field(description="The member's VirtualMachine.")
    role: MemberRole = Field(description="Primary (takes writes) or Replica (streams).")
    ready: bool = Field(description="Serving: the primary answers, a replica streams.")
    state: str = Field(
        description="What the member does: Serving, Streaming, Cloning, Starting, Stopped."
    )
    timeline: int | None = Field(default=None, description="Its timeline.")
    lsn: str | None = Field(
        default=None, description="Its WAL location: written (primary) or replayed (replica)."
    )
    lag_bytes: int | None = Field(
        default=None,
        description="Replicas: how far the replay is behind the primary's WAL, in bytes.",
        json_schema_extra={"format": "int64"},
    )


class Served(Section):
    """The value of each dbi.dev/*-requested-at annotation last served."""

    reconcile_requested_at: str | None = Field(
        default=None, description="dbi.dev/reconcile-requested-at: a pass ran for it."
    )
    restart_requested_at: str | None = Field(
        default=None,
        description="dbi.dev/restart-requested-at: a deferred resize was applied (restarting "
        "the VM), or none was due.",
    )
    rotate_requested_at: str | None = Field(
        default=None, description="dbi.dev/rotate-requested-at: the app password was rotated."
    )
    rotate_admin_requested_at: str | None = Field(
        default=None,
        description="dbi.dev/rotate-admin-requested-at: dbi's admin password was rotated.",
    )
    backup_requested_at: str | None = Field(
        default=None,
        description="dbi.dev/backup-requested-at: a backup was started (dbi backups lists it).",
    )
    switchover_requested_at: str | None = Field(
        default=None,
        description="dbi.dev/switchover-requested-at: the switchover is complete (or there "
        "was no replica to switch to).",
    )

    def merged_over(self, older: Served | None) -> Served:
        """These values, and ``older``'s where this has none."""
        if older is None:
            return self
        newer = self.model_dump(exclude_none=True)
        return Served.model_validate({**older.model_dump(exclude_none=True), **newer})


class WalArchive(Section):
    """What the WAL archiver (``activities.operations.walarchive``) last did for the
    instance; it alone writes this (a pass's status write leaves it)."""

    last_archived_wal: str | None = Field(
        default=None,
        alias="lastArchivedWAL",
        max_length=64,
        description="The newest WAL file stored, such as 000000010000000000000007.",
    )
    last_archived_at: datetime | None = Field(
        default=None, description="When it was stored: the recoverable window's end is before."
    )
    since: datetime | None = Field(
        default=None,
        description="When the archiver first stored WAL of this instance: a restore to a "
        "point can start from the backups begun since.",
    )
    checked_at: datetime | None = Field(
        default=None,
        description="When the archiver last emptied the guest's spool: at most ten minutes "
        "old while archiving works (DbiWalArchivingStuck fires after 15).",
    )
    lag_bytes: int | None = Field(
        default=None,
        ge=0,
        description="At checkedAt: bytes of WAL the server had written past the end of "
        "lastArchivedWAL (up to one segment, 16 MiB, while archiving keeps up).",
    )


class RestoreTested(Section):
    """How the last restore test (spec.backup.restoreTest) went; its workflow alone
    writes this (a pass's status write leaves it, and shows it as the condition
    RestoreTestSucceeded)."""

    succeeded: bool = Field(description="Whether the throwaway instance went Ready.")
    reason: str = Field(max_length=128, description="Why, in a word.")
    message: str = Field(default="", max_length=1024, description="Why, in words.")
    instance: str | None = Field(
        default=None, max_length=63, description="The throwaway instance (deleted after)."
    )
    started_at: datetime = Field(description="When the test began.")
    finished_at: datetime = Field(description="When it ended.")


class DBInstanceStatus(Section):
    """The observed state of the instance, written by the orchestrator only."""

    phase: Phase | None = Field(
        default=None,
        description="A one-word summary for people (Provisioning, Starting, Running, "
        "Stopping, Stopped, Resizing, Upgrading, Degraded, Failed, Deleting, Paused). "
        "Scripts should read conditions instead.",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="One condition per convergence step, plus Ready, Reconciling and Stalled.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        description="The metadata.generation this status describes: the one the last "
        "pass read. 0 (the API server's default) until the first pass; kstatus, Flux and "
        "Argo CD read the conditions only when it equals metadata.generation.",
        json_schema_extra={"format": "int64"},
    )
    converged_generation: int | None = Field(
        default=None,
        ge=0,
        description="The last metadata.generation for which every step was satisfied.",
        json_schema_extra={"format": "int64"},
    )
    endpoint: Endpoint | None = Field(default=None, description="Where clients connect.")
    credentials_secret_name: str | None = Field(
        default=None,
        description="Name of the Secret with username, password, database, host, port and uri.",
    )
    observed: Observed | None = Field(default=None, description="What was last observed.")
    primary: str | None = Field(
        default=None, description="spec.instances: the member that takes writes."
    )
    members: list[Member] | None = Field(
        default=None,
        description="spec.instances: each member, its role, state and replication.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    workflow_id: str | None = Field(
        default=None,
        description="Id of the instance's Temporal workflow, to find it in the Temporal UI.",
    )
    served: Served | None = Field(
        default=None, description="The dbi.dev/*-requested-at annotation values served."
    )
    archive: WalArchive | None = Field(
        default=None, description="WAL archiving (spec.backup), as the archiver last saw it."
    )
    restore_test: RestoreTested | None = Field(
        default=None, description="The last restore test (spec.backup.restoreTest)."
    )


class DBInstance(Section):
    """A managed PostgreSQL instance running in a KubeVirt virtual machine."""

    model_config = ConfigDict(extra="ignore")

    api_version: str = Field(default=names.API_VERSION, alias="apiVersion")
    kind: str = Field(default=names.KIND)
    metadata: dict[str, Any] = Field(default_factory=dict)
    spec: DBInstanceSpec
    status: DBInstanceStatus = Field(default_factory=DBInstanceStatus)
