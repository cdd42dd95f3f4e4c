"""The step contract: what every convergence step returns, and what it is given.

A step observes the current state, compares it with the desired state, performs at
most one bounded unit of related work, and returns a ``StepResult``. None of the
calls a step makes should block waiting for a transition, and all of them must be
idempotent: a step may run again at any time, after any failure.

- Satisfied: the step's prerequisite is proven now; the pass goes on.
- Pending: external state was changed, or an asynchronous transition is under way;
  the pass ends, and the workflow waits for a wake-up or the requeue hint.
- Terminal: retrying the same observed state cannot help (a spec or configuration
  change is needed); the workflow waits for a new generation or a ``retry`` signal.
- Transient: a retryable API, provider or infrastructure error; the workflow backs
  off exponentially.

A result holds no free-form data: its message is a stable sentence for people (no
error detail, never a secret) and its facts are typed fields. Error detail goes to
logs and spans.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from dbi.models import Member, Served
from dbi.spec import PowerState


class Outcome(StrEnum):
    SATISFIED = "Satisfied"
    PENDING = "Pending"
    TERMINAL = "Terminal"
    TRANSIENT = "Transient"


class Common(StrEnum):
    """Reasons several steps give, each with one meaning: a step's own ``Reason`` names
    them (``STOPPED = Common.STOPPED``), so the words are written once."""

    STOPPED = "Stopped"  # spec.powerState Stopped: nothing to look at
    NO_ADDRESS = "NoAddress"  # the VM runs but has no address yet
    BOOTING = "Booting"  # the guest has an address and does not answer yet
    MAINTENANCE_WINDOW = "MaintenanceWindow"  # a restart waits for the window
    OWNERS_SYNCED = "OwnerReferencesSynced"  # owner references follow deletionPolicy
    RESTARTING = "Restarting"  # the VM restarts to take a change
    RESTART_REQUIRED = "RestartRequired"  # a change waits for a restart dbi may not make
    ONE_DISK_LAYOUT = "OneDiskLayout"  # the VM boots its data disk: no root disk to swap
    SCHEDULE_DELETED = "ScheduleDeleted"  # the instance's backup Schedule was deleted


# The reason of a step whose activity kept raising (the runner's, for any step).
STEP_FAILED = "StepFailed"
# The reason of a step that would act while dbi.dev/paused holds every action.
PAUSED = "Paused"
# The requeue hint of a step that has just changed something: look again at once (the
# API server reads back its own writes), with no timer.
AT_ONCE = 0.0

A = TypeVar("A")


class Facts(BaseModel):
    """What a step observed that status publishes; every field is typed and optional."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    endpoint_host: str | None = None
    endpoint_port: int | None = None
    cpu: int | None = None
    memory: str | None = None
    storage: str | None = None
    power_state: PowerState | None = None
    postgres_version: str | None = None
    image: str | None = None
    address: str | None = None
    credentials_secret_name: str | None = None
    parameters: tuple[str, ...] | None = None
    pending_restart: tuple[str, ...] | None = None
    primary: str | None = None
    members: tuple[Member, ...] | None = None

    def merged_over(self, older: Facts) -> Facts:
        """Return these facts, completed by ``older`` where this pass saw nothing."""
        newer = self.model_dump(exclude_none=True)
        return Facts.model_validate({**older.model_dump(exclude_none=True), **newer})


class PipelineStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    condition_type: str


class StepResult(BaseModel):
    """The outcome of one step in one pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    step: str = Field(description="The step's name, such as vm.")
    outcome: Outcome
    condition_type: str = Field(description="The condition the step owns, such as VMProvisioned.")
    reason: str = Field(pattern=r"^[A-Z][A-Za-z0-9]*$", description="A typed reason constant.")
    message: str = Field(max_length=512, description="A stable sentence, without error detail.")
    requeue_after_seconds: float | None = Field(
        default=None, ge=0, description="When to look again if nothing wakes the workflow."
    )
    held: bool = Field(
        default=False,
        description="Pending only: a planned action waits for a maintenance window or an "
        "operator (resizePolicy Deferred); the steps after this one still run, and the "
        "instance is still checked at its healthCheckInterval.",
    )
    announced: bool = Field(
        default=False,
        description="Pending only: a transition whose end the watcher wakes the instance "
        "on (a VM starting or stopping), so the requeue hint is a fallback for a missed "
        "event; the worker makes that look, not the workflow (``activities.worker.rechecks``).",
    )
    facts: Facts = Field(default_factory=Facts)


class StepInput(BaseModel):
    """What every step activity is given: which instance, and the pass's permissions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    uid: str
    allow_restart: bool = Field(
        default=False,
        description="A force_resize update asked for a restart that resizePolicy defers.",
    )
    paused: bool = Field(
        default=False,
        description="dbi.dev/paused is true: steps observe and decide, and take no action.",
    )
    backup_requested: str | None = Field(
        default=None,
        description="The dbi.dev/backup-requested-at value not served yet: the backup step "
        "starts that backup.",
    )
    switchover_requested: str | None = Field(
        default=None,
        description="The dbi.dev/switchover-requested-at value not served yet: the replicas "
        "step switches over.",
    )
    pass_id: str = Field(
        default="",
        description=(
            "The pass the activity belongs to. A step starts from the instance this pass's"
            " load read, when this worker process did that read; without one (or without"
            " an id) it reads the instance itself."
        ),
    )
    idle: bool = Field(
        default=False,
        description=(
            "A Ready instance's health check that nothing woke: the pass's load and steps"
            " may read what the worker watches from its views (activities.infra.views); a step"
            " that would act runs the pass again on fresh reads first."
        ),
    )


class InstanceSnapshot(BaseModel):
    """What the workflow needs to know of its DBInstance at the start of a pass."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exists: bool
    uid: str | None = None
    generation: int = 0
    deleting: bool = False
    power_state: PowerState = PowerState.RUNNING
    health_check_interval_seconds: float = 300.0
    paused: bool = False
    # spec.instances: set, the pass runs the replicas step (dbi.pipeline.REPLICAS).
    instances: int | None = None
    unserved: Served = Field(
        default_factory=Served,
        description="The dbi.dev/*-requested-at values that differ from those served.",
    )


@dataclass(frozen=True)
class Decision(Generic[A]):
    """A step's result, and the one action to take (None: nothing to change). A step that
    acts is Pending: the next look observes what the action did."""

    result: StepResult
    action: A | None = None


def goes_on(result: StepResult) -> bool:
    """Whether a pass runs the step after one that returned ``result``: after a Satisfied
    one, and after a Pending one whose action is held (it waits for a maintenance window
    or an operator: health checks go on while a restart waits for days)."""
    if result.outcome is Outcome.SATISFIED:
        return True
    return result.outcome is Outcome.PENDING and result.held


class StepsInput(BaseModel):
    """A pass's steps to run in one go (``activities.worker.passes.Passes.run_steps``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    steps: tuple[str, ...] = Field(description="The pass's steps, by name, in order.")
    step_input: StepInput


class StepsResult(BaseModel):
    """The results of the steps a pass ran in one go, and the step that raised, if one
    did."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    results: list[StepResult]
    raised: str | None = Field(
        default=None,
        description="The step that raised: the pass goes on from it with an activity per "
        "step, whose retries and failure are a step's own.",
    )
    written: bool = Field(
        default=False,
        description="The pass's status was written after its steps (``run_pass``): the "
        "workflow does not write it again.",
    )
    rechecked: bool = Field(
        default=False,
        description="The pass settled the instance (``run_pass`` with ``settle``): the "
        "worker re-checks it every healthCheckInterval, as after an idle pass "
        "(``LoadedPass.rechecked``).",
    )


def in_order(steps_input: StepsInput, run: Callable[[str, StepInput], StepResult]) -> StepsResult:
    """Run the steps of ``steps_input`` with ``run`` while the pass goes on (``goes_on``),
    as the workflow's runner would one activity at a time; stop at a step that raises
    and name it (its error is the step's: ``run`` records it)."""
    results: list[StepResult] = []
    for step in steps_input.steps:
        try:
            result = run(step, steps_input.step_input)
        except Exception:
            return StepsResult(results=results, raised=step)
        results.append(result)
        if not goes_on(result):
            break
    return StepsResult(results=results)
