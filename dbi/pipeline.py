"""The DBInstance's steps, as data: the workflow runs them in order, status names their
conditions, and docs list them. An activity of the same name performs each step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from dbi.status import PipelineStep


@dataclass(frozen=True)
class StepSpec:
    """One step of a pipeline: its activity, its condition, and what the UI says of it."""

    name: str
    condition_type: str
    summary: str
    # A step makes a few short API calls and connections (3 s connect timeouts); an
    # attempt lost with a dying worker is retried after this much.
    timeout: timedelta = timedelta(seconds=30)

    @property
    def reported(self) -> PipelineStep:
        return PipelineStep(name=self.name, condition_type=self.condition_type)


CONVERGE: tuple[StepSpec, ...] = (
    StepSpec("preflight", "SpecValid", "preflight: check the spec, add the finalizer"),
    StepSpec("credentials", "CredentialsReady", "credentials: admin and app Secrets"),
    StepSpec("vm", "VMProvisioned", "vm: the KubeVirt VirtualMachine"),
    StepSpec("power", "PowerSynced", "power: runStrategy from powerState"),
    StepSpec("resize", "SizeSynced", "resize: CPU, memory and disk"),
    StepSpec("retention", "RetentionSynced", "retention: what deletionPolicy keeps, out of reach"),
    StepSpec("admin", "AdminReady", "admin: dbi's admin credential logs in, rotated, recovered"),
    StepSpec("health", "DatabaseHealthy", "health: connect as admin, SELECT 1"),
    StepSpec("access", "AccessReady", "access: app role, database and password"),
    StepSpec("monitoring", "MonitoringReady", "monitoring: Service and ServiceMonitor"),
)


TEARDOWN: tuple[StepSpec, ...] = (
    StepSpec("teardown_monitoring", "MonitoringRemoved", "teardown: monitoring objects"),
    StepSpec("teardown_vm", "VMReleased", "teardown: VM and disks per deletionPolicy"),
    StepSpec("teardown_finalizer", "FinalizerRemoved", "teardown: remove the finalizer"),
)

# Activities that are not steps.
LOAD_INSTANCE = "load_instance"
WRITE_STATUS = "write_status"
ROTATE_CREDENTIALS = "rotate_credentials"
ROTATE_ADMIN_CREDENTIALS = "rotate_admin_credentials"
