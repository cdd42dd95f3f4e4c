"""The DBInstance's steps, as data: the one place a step's name (its activity's name
too), its condition and what the UI and status say of it are written.

The workflow runs ``CONVERGE`` (or ``TEARDOWN`` once the instance is being deleted) in
order; each step's module (``activities/steps/<name>.py``) reads its ``StepSpec`` from here,
the worker registers its activity under ``spec.name``, status names its condition, and
docs list it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from dbi import names
from dbi.models import Phase
from dbi.steps import Decision, Outcome, PipelineStep, StepResult

A = TypeVar("A")


@dataclass(frozen=True)
class StepSpec:
    """One step of a pipeline: its name (and its activity's), the condition it owns, what
    the UI says of it, and the phase people see while it is Pending."""

    name: str
    condition_type: str
    summary: str
    pending_phase: Phase = Phase.PROVISIONING
    # A step makes a few short API calls and connections (3 s connect timeouts); an
    # attempt lost with a dying worker is retried after this much.
    timeout: timedelta = timedelta(seconds=30)

    @property
    def reported(self) -> PipelineStep:
        return PipelineStep(name=self.name, condition_type=self.condition_type)

    def result(
        self,
        outcome: Outcome,
        reason: str,
        message: str,
        *,
        requeue_after_seconds: float | None = None,
        held: bool = False,
        announced: bool = False,
        **facts: object,
    ) -> StepResult:
        """Return this step's result; ``facts`` are the fields of ``dbi.steps.Facts``;
        ``held``: a Pending action waits, and the steps after this one run anyway;
        ``announced``: a Pending transition whose end a watch event announces."""
        return StepResult.model_validate(
            {
                "step": self.name,
                "outcome": outcome,
                "condition_type": self.condition_type,
                "reason": reason,
                "message": message,
                "requeue_after_seconds": requeue_after_seconds,
                "held": held,
                "announced": announced,
                "facts": facts,
            }
        )

    # A step's decide returns one of these four (``activities.steps.loop``): its result and,
    # for a Pending one that changes the world, the one action to take.

    def satisfied(self, reason: str, message: str, **facts: Any) -> Decision[Any]:
        """Nothing to change: the step's condition is True."""
        return Decision(self.result(Outcome.SATISFIED, reason, message, **facts))

    def pending(
        self,
        reason: str,
        message: str,
        action: A | None = None,
        *,
        after: float | None = None,
        held: bool = False,
        announced: bool = False,
        **facts: Any,
    ) -> Decision[A]:
        """Under way: the step takes ``action`` (None: it waits for something else), and
        the pass looks again ``after`` seconds (None: at the workflow's back-off). See
        ``result`` for ``held`` and ``announced``."""
        result = self.result(
            Outcome.PENDING,
            reason,
            message,
            requeue_after_seconds=after,
            held=held,
            announced=announced,
            **facts,
        )
        return Decision(result, action)

    def transient(
        self, reason: str, message: str, *, after: float | None = None, **facts: Any
    ) -> Decision[Any]:
        """The step could not observe or act this time; the pass retries with back-off."""
        return Decision(
            self.result(Outcome.TRANSIENT, reason, message, requeue_after_seconds=after, **facts)
        )

    def terminal(self, reason: str, message: str, **facts: Any) -> Decision[Any]:
        """Only a change of the spec (or an operator) can move the step on."""
        return Decision(self.result(Outcome.TERMINAL, reason, message, **facts))


PREFLIGHT = StepSpec("preflight", "SpecValid", "preflight: check the spec, add the finalizer")
CREDENTIALS = StepSpec(
    "credentials", "CredentialsReady", "credentials: admin credential, app and boot Secrets"
)
VM = StepSpec("vm", "VMProvisioned", "vm: the KubeVirt VirtualMachine")
# While power is Pending the phase says Starting or Stopping (dbi.status).
POWER = StepSpec("power", "PowerSynced", "power: runStrategy from powerState")
UPGRADE = StepSpec(
    "upgrade",
    "VersionCurrent",
    "upgrade: the data is spec.version's major (pg_upgrade)",
    Phase.UPGRADING,
)
REPAVE = StepSpec(
    "repave", "RootDiskCurrent", "repave: the root disk from the image", Phase.UPGRADING
)
RESIZE = StepSpec("resize", "SizeSynced", "resize: CPU, memory and disk", Phase.RESIZING)
RETENTION = StepSpec(
    "retention", "RetentionSynced", "retention: what deletionPolicy keeps, out of reach"
)
TLS = StepSpec("tls", "TLSReady", "tls: the guest serves its current certificate", Phase.STARTING)
ADMIN = StepSpec("admin", "AdminReady", "admin: dbi's admin credential logs in, rotated, recovered")
HEALTH = StepSpec("health", "DatabaseHealthy", "health: connect as admin, SELECT 1", Phase.STARTING)
ACCESS = StepSpec(
    "access", "AccessReady", "access: app role, database and password", Phase.STARTING
)
MONITORING = StepSpec("monitoring", "MonitoringReady", "monitoring: Service and ServiceMonitor")
BACKUP = StepSpec("backup", "BackupScheduled", "backup: the Temporal Schedule of spec.backup")
SETTINGS = StepSpec("settings", "SettingsApplied", "settings: spec.postgresql.parameters in force")
# Only for an instance that sets spec.instances (workflows.passes.converge).
REPLICAS = StepSpec(
    "replicas", "ReplicasReady", "replicas: spec.instances' members clone and stream"
)

CONVERGE: tuple[StepSpec, ...] = (
    PREFLIGHT,
    CREDENTIALS,
    VM,
    POWER,
    UPGRADE,
    REPAVE,
    RESIZE,
    RETENTION,
    TLS,
    ADMIN,
    HEALTH,
    ACCESS,
    MONITORING,
    BACKUP,
    SETTINGS,
)
# The pass of an instance that sets spec.instances: the replicas step before tls (the
# steps from tls on talk to the primary it keeps).
REPLICATED: tuple[StepSpec, ...] = (
    *CONVERGE[: CONVERGE.index(TLS)],
    REPLICAS,
    *CONVERGE[CONVERGE.index(TLS) :],
)

TEARDOWN_BACKUP = StepSpec(
    "teardown_backup",
    "BackupScheduleRemoved",
    "teardown: the backup schedule (backups stay)",
    Phase.DELETING,
)
TEARDOWN_MONITORING = StepSpec(
    "teardown_monitoring", "MonitoringRemoved", "teardown: monitoring objects", Phase.DELETING
)
TEARDOWN_VM = StepSpec(
    "teardown_vm", "VMReleased", "teardown: VM and disks per deletionPolicy", Phase.DELETING
)
TEARDOWN_FINALIZER = StepSpec(
    "teardown_finalizer", "FinalizerRemoved", "teardown: remove the finalizer", Phase.DELETING
)

TEARDOWN: tuple[StepSpec, ...] = (
    TEARDOWN_BACKUP,
    TEARDOWN_MONITORING,
    TEARDOWN_VM,
    TEARDOWN_FINALIZER,
)

# A DBDatabase's steps (dbi.databases; activities/objects/database.py): the same shape,
# its own table. Its workflow (workflows/objects.py) runs one activity per step.
DATABASE_INSTANCE = StepSpec(
    "database_instance", "InstanceReady", "instance: the DBInstance is Ready; the spec; finalizer"
)
DATABASE_CREATE = StepSpec(
    "database_create", "DatabaseReady", "database: created, proven dbi's, owned by spec.owner"
)
DATABASE_EXTENSIONS = StepSpec(
    "database_extensions", "ExtensionsReady", "extensions: spec.extensions created"
)
DATABASE: tuple[StepSpec, ...] = (DATABASE_INSTANCE, DATABASE_CREATE, DATABASE_EXTENSIONS)
DATABASE_RELEASE = StepSpec(
    "database_release",
    "DatabaseReleased",
    "teardown: drop (Delete) or release (Retain) the database; remove the finalizer",
    Phase.DELETING,
)
DATABASE_TEARDOWN: tuple[StepSpec, ...] = (DATABASE_RELEASE,)
# A DBRole's (dbi.roles; activities/objects/role.py).
ROLE_INSTANCE = StepSpec(
    "role_instance", "InstanceReady", "instance: the DBInstance is Ready; the spec; finalizer"
)
ROLE_SECRET = StepSpec(
    "role_secret", "SecretReady", "secret: <name>-credentials holds a password and every key"
)
ROLE_CREATE = StepSpec(
    "role_create", "RoleReady", "role: created, proven dbi's, LOGIN, limit and password"
)
ROLE_GRANTS = StepSpec("role_grants", "GrantsReady", "grants: member of spec.inRoles, no more")
ROLE: tuple[StepSpec, ...] = (ROLE_INSTANCE, ROLE_SECRET, ROLE_CREATE, ROLE_GRANTS)
ROLE_RELEASE = StepSpec(
    "role_release",
    "RoleReleased",
    "teardown: drop the role (kept NOLOGIN while it owns objects); remove the finalizer",
    Phase.DELETING,
)
ROLE_TEARDOWN: tuple[StepSpec, ...] = (ROLE_RELEASE,)
LOAD_OBJECT = "load_object"
WRITE_OBJECT_STATUS = "write_object_status"

# Activities that are not steps.
LOAD_INSTANCE = "load_instance"
WRITE_STATUS = "write_status"
# The activity that runs a local pass's steps one after the other (``dbi.steps.in_order``),
# then the pass's status written as WRITE_STATUS writes it (one marker a pass).
RUN_PASS = "run_pass"  # noqa: S105 (an activity's name)
# An idle pass's load, then, when it found the instance as the last pass did, RUN_PASS.
LOAD_AND_RUN_PASS = "load_and_run_pass"  # noqa: S105 (an activity's name)
# The backup workflow's activities (activities/operations: backup.py, basebackup.py).
BEGIN_BACKUP = "begin_backup"
TAKE_BACKUP = "take_backup"
FINISH_BACKUP = "finish_backup"
PRUNE_BACKUPS = "prune_backups"
ARCHIVE_WAL = "archive_wal"  # each instance's spooled WAL, into its store
REAP_BACKUPS = "reap_backups"  # the files of DBBackups deleted by hand or with a namespace
# The restore test workflow's activities (activities/operations/restoretest.py).
BEGIN_RESTORE_TEST = "begin_restore_test"
CHECK_RESTORE_TEST = "check_restore_test"
END_RESTORE_TEST = "end_restore_test"
# The major upgrade workflow's activities (activities/operations/pgupgrade.py).
BEGIN_UPGRADE = "begin_upgrade"
RUN_UPGRADE = "run_upgrade"
VERIFY_UPGRADE = "verify_upgrade"
ROLLBACK_UPGRADE = "rollback_upgrade"
FINISH_UPGRADE = "finish_upgrade"
# What runs for minutes to hours (a base backup, a guest's pg_upgrade, ANALYZE): on a
# task queue of its own (``names.long_task_queue``), with slots of its own, so that no
# number of them holds up any instance's steps.
LONG = frozenset({TAKE_BACKUP, RUN_UPGRADE, VERIFY_UPGRADE, ROLLBACK_UPGRADE, ARCHIVE_WAL})
# The activities that serve the updates of the same names.
ROTATE_CREDENTIALS = names.ROTATE_CREDENTIALS
ROTATE_ADMIN_CREDENTIALS = names.ROTATE_ADMIN_CREDENTIALS
