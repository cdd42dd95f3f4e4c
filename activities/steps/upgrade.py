"""upgrade (VersionCurrent): the data is of spec.version's major, upgraded when it rose.

The data's major is what its data disk's claim records (``dbi.dev/data-major``: set when
the disk is made, moved by an upgrade at its end; a claim made before the record, by
what PostgreSQL last reported). When ``spec.version`` is above it, the step starts one
DBUpgradeWorkflow (``workflows.upgrade``; id ``dbupgrade/<ns>/<name>-<uid>-to-<major>``,
and a suffix from ``dbi.dev/reconcile-requested-at`` once one failed: a new value tries
again) and waits for it (Pending ``Upgrading``; the pass stops here, so nothing else
restarts the VM meanwhile). The upgrade restarts the VM, so a maintenance window holds
its start (``MaintenanceWindow``), as does a stopped instance (``UpgradeWaitsForStart``).
A failed upgrade was rolled back by its workflow: Terminal, with its reason. Data newer
than spec.version, or a one-disk instance, is Terminal too. Idempotency key: the
workflow id (a start of one started already is a no-op).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from activities.infra import manifests
from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from activities.infra.postgres import major
from activities.infra.schedules import Upgrade
from activities.steps.loop import Anatomy
from dbi import maintenance, names
from dbi.pipeline import UPGRADE as SPEC
from dbi.spec import PowerState
from dbi.steps import Common, Decision, StepInput
from dbi.upgrades import FINISH_FAILED, UpgradeRequest

POLL_SECONDS = 5.0
STOPPED_CHECK_SECONDS = 60.0


class Reason(StrEnum):
    CURRENT = SPEC.condition_type
    STARTED = "UpgradeStarted"
    UPGRADING = "Upgrading"
    WAITS_FOR_START = "UpgradeWaitsForStart"
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW
    FAILED = "UpgradeFailed"
    DATA_NEWER = "DataNewerThanVersion"
    ONE_DISK = Common.ONE_DISK_LAYOUT
    UNAVAILABLE = "WorkflowsUnavailable"


class Action(StrEnum):
    START = "start-upgrade"


@dataclass(frozen=True, kw_only=True)
class Observation:
    target: int  # spec.version
    data: int | None  # the data's major; None: not known (a new instance)
    one_disk: bool = False
    stopped: bool = False
    hold: maintenance.Hold | None = None
    workflow_id: str = ""
    run: Upgrade | None = None  # the upgrade's workflow; None: not started
    can_start: bool = True  # the worker has a Temporal client for steps


def decide(obs: Observation) -> Decision[Action]:
    """Wait for, start, or report the major upgrade (pure)."""
    if obs.data is None or obs.data == obs.target:
        message = f"The data is PostgreSQL {obs.target}'s."
        return SPEC.satisfied(Reason.CURRENT, message)
    if obs.data > obs.target:
        message = (
            f"The data is PostgreSQL {obs.data}'s, newer than spec.version {obs.target}; "
            f"a major is never downgraded: set spec.version to {obs.data}."
        )
        return SPEC.terminal(Reason.DATA_NEWER, message)
    versions = f"PostgreSQL {obs.data} to {obs.target}"
    if obs.one_disk:
        message = (
            f"spec.version asks for {versions}, but this instance keeps its OS and data on "
            "one disk (made before root disks), which an upgrade cannot keep apart. Move it: "
            "dbi backup, then a new DBInstance with spec.restore.from.backup, then upgrade "
            "that one."
        )
        return SPEC.terminal(Reason.ONE_DISK, message)
    if obs.run is None:
        return _start(obs, versions)
    return _follow(obs, obs.run, versions)


def _follow(obs: Observation, run: Upgrade, versions: str) -> Decision[Action]:
    """An upgrade started: wait while it runs; Terminal, with its reason, if it failed."""
    if run.running:
        message = f"The major upgrade from {versions} runs (workflow {obs.workflow_id})."
        return SPEC.pending(Reason.UPGRADING, message[:512], after=POLL_SECONDS)
    result = run.result
    if result is not None and result.ok:
        return SPEC.pending(
            Reason.UPGRADING, f"The major upgrade from {versions} is finishing.", after=POLL_SECONDS
        )
    said = result.message if result is not None else ""
    again = "annotate dbi.dev/reconcile-requested-at with a new value to try again."
    if result is None:  # failed or terminated: nothing says where it stopped
        message = (
            f"The major upgrade's workflow {obs.workflow_id} ended without a result (it "
            "failed or was terminated), so whether the old data runs is not known: its "
            f"history in the Temporal UI shows where it stopped. Then {again}"
        )
    elif result.reason == FINISH_FAILED:  # past the point of no return
        message = f"The major upgrade could not finish: {again} {said}"
    else:
        message = (
            "The major upgrade was rolled back: the old data runs as before. Fix the "
            f"cause, then {again} {said}"
        )
    reason = result.reason if result is not None else Reason.FAILED
    return SPEC.terminal(reason, message[:512])


def _start(obs: Observation, versions: str) -> Decision[Action]:
    if not obs.can_start:
        message = "This worker cannot start workflows from steps (no Temporal client)."
        return SPEC.terminal(Reason.UNAVAILABLE, message)
    if obs.stopped:
        message = f"The major upgrade from {versions} waits until the instance runs."
        return SPEC.pending(Reason.WAITS_FOR_START, message, after=STOPPED_CHECK_SECONDS)
    if obs.hold is not None:
        message = obs.hold.message(f"The major upgrade from {versions}")
        return SPEC.pending(Reason.MAINTENANCE_WINDOW, message[:512], after=obs.hold.seconds)
    message = f"The major upgrade from {versions} was started (workflow {obs.workflow_id})."
    return SPEC.pending(Reason.STARTED, message[:512], Action.START, after=POLL_SECONDS)


def data_major(kube: Kube, instance: Instance) -> tuple[int | None, bool]:
    """The major of the instance's data as dbi knows it, and whether it is a one-disk
    instance: the data claim's record, else what PostgreSQL last reported."""
    claim = kube.pvc(instance.namespace, manifests.data_claim_name(instance))
    annotations = (claim.metadata.annotations if claim and claim.metadata else None) or {}
    one_disk = bool(annotations.get(manifests.IMAGE_ANNOTATION))
    recorded = annotations.get(names.DATA_MAJOR_ANNOTATION, "")
    if recorded.isdigit():
        return int(recorded), one_disk
    status = instance.model.status
    observed = status.observed.postgres_version if status and status.observed else None
    return major(observed), one_disk


def workflow_id(instance: Instance, target: int) -> str:
    """This instance's upgrade to ``target``: a new reconcile request, a new attempt."""
    asked = instance.annotations.get(names.RECONCILE_REQUESTED_AT, "")
    attempt = hashlib.sha256(asked.encode()).hexdigest()[:8] if asked else ""
    return names.upgrade_workflow_id(
        instance.namespace, instance.name, instance.uid, target, attempt
    )


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    spec = instance.model.spec
    target = int(spec.version)
    data, one_disk = data_major(ctx.kube, instance)
    obs = Observation(target=target, data=data, one_disk=one_disk)
    if data is None or data >= target or one_disk:
        return obs
    wid = workflow_id(instance, target)
    return Observation(
        target=target,
        data=data,
        stopped=spec.power_state is PowerState.STOPPED,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
        workflow_id=wid,
        run=ctx.schedules.upgrade(wid) if ctx.schedules is not None else None,
        can_start=ctx.schedules is not None,
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    assert ctx.schedules is not None and obs.data is not None
    request = UpgradeRequest(
        namespace=instance.namespace,
        name=instance.name,
        uid=instance.uid,
        from_major=obs.data,
        to_major=obs.target,
    )
    ctx.schedules.start_upgrade(request, obs.workflow_id)


STEP = Anatomy(SPEC, observe, decide, act)
