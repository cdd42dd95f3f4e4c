"""DBUpgradeWorkflow: one major upgrade of one DBInstance, visible step by step.

Started by the instance's ``upgrade`` step when ``spec.version`` rose above its data's
major (``dbi.upgrades`` tells the sequence): ``begin`` (the new major's root disk),
``run`` (the restart onto it, where the guest runs pg_upgrade --check, then pg_upgrade
into a new data directory and keeps the old one; the activity heartbeats while it
waits, and a lost worker's attempt is taken over by another, which finds what was
done), ``verify`` (the new server, ANALYZE), then ``finish`` (the point of no return:
the old data is removed). A failure before ``finish`` runs ``rollback``: the old root
disk boots the old data again. The workflow ends with a result saying which; it does not
fail because an upgrade did.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from dbi import names, pipeline
    from dbi.upgrades import FINISH_FAILED, Plan, Ran, UpgradeRequest, UpgradeResult

SHORT = timedelta(seconds=30)
SHORT_RETRY = RetryPolicy(maximum_interval=timedelta(seconds=10), maximum_attempts=10)
# The guest's boot (pg_upgrade of the whole data directory) is waited for this long;
# the activity heartbeats every 2 s, and one silent for BOOT_HEARTBEAT lost its worker.
BOOT_TIMEOUT = timedelta(hours=6)
BOOT_HEARTBEAT = timedelta(seconds=30)
# A boot the activity keeps failing to follow (not one it saw fail: that is a Ran) is
# given up after these attempts, and the rollback runs.
BOOT_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=2),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=3,
)
VERIFY_TIMEOUT = timedelta(hours=2)


@workflow.defn(name=names.UPGRADE_WORKFLOW_TYPE)
class DBUpgradeWorkflow:
    @workflow.run
    async def run(self, request: UpgradeRequest) -> UpgradeResult:
        where = f"{request.namespace}/{request.name}"
        versions = f"PostgreSQL {request.from_major} → {request.to_major}"
        workflow.set_current_details(f"major upgrade of **{where}**: {versions}")
        plan: Plan = await workflow.execute_activity(
            pipeline.BEGIN_UPGRADE,
            request,
            result_type=Plan,
            start_to_close_timeout=SHORT,
            retry_policy=SHORT_RETRY,
            summary=f"begin: the root disk of PostgreSQL {request.to_major}",
        )
        if plan.reason is not None:
            return UpgradeResult(ok=False, reason=plan.reason, message=plan.message)
        ran = await self._boot(
            pipeline.RUN_UPGRADE,
            request,
            plan,
            "run: restart on it; the guest runs pg_upgrade --check, then pg_upgrade",
        )
        if ran.ok:
            try:
                ran = await workflow.execute_activity(
                    pipeline.VERIFY_UPGRADE,
                    args=[request, plan],
                    result_type=Ran,
                    task_queue=names.long_task_queue(workflow.info().task_queue),
                    start_to_close_timeout=VERIFY_TIMEOUT,
                    heartbeat_timeout=BOOT_HEARTBEAT,
                    retry_policy=SHORT_RETRY,
                    summary=f"verify: PostgreSQL {request.to_major} answers; ANALYZE",
                )
            except ActivityError as e:  # still before the point of no return: roll back
                ran = Ran(ok=False, phase="verify", output=str(e.cause or e)[:512])
        if not ran.ok:
            await self._boot(
                pipeline.ROLLBACK_UPGRADE,
                request,
                plan,
                "rollback: the old root disk and the old data boot again",
            )
            reason = {
                "check": "UpgradeCheckFailed",
                "copy": "UpgradeFailed",
                "boot": "UpgradeBootFailed",
            }.get(ran.phase, "UpgradeVerifyFailed")
            said = f" {ran.output}" if ran.output else ""
            message = f"The upgrade to PostgreSQL {request.to_major} failed at {ran.phase}:{said}"
            return UpgradeResult(ok=False, reason=reason, message=message[:1024])
        try:
            version: str = await workflow.execute_activity(
                pipeline.FINISH_UPGRADE,
                args=[request, plan],
                result_type=str,
                start_to_close_timeout=SHORT,
                retry_policy=SHORT_RETRY,
                summary="finish: remove the old data (the point of no return)",
            )
        except ActivityError as e:
            message = (
                f"PostgreSQL {request.to_major} was verified, but finishing failed "
                f"({e.cause or e}); the old data is still there."
            )
            return UpgradeResult(ok=False, reason=FINISH_FAILED, message=message[:1024])
        return UpgradeResult(
            ok=True, reason="Upgraded", message=f"PostgreSQL {version} runs the data."
        )

    async def _boot(self, activity: str, request: UpgradeRequest, plan: Plan, summary: str) -> Ran:
        try:
            ran: Ran = await workflow.execute_activity(
                activity,
                args=[request, plan],
                result_type=Ran,
                task_queue=names.long_task_queue(workflow.info().task_queue),
                start_to_close_timeout=BOOT_TIMEOUT,
                heartbeat_timeout=BOOT_HEARTBEAT,
                retry_policy=BOOT_RETRY,
                summary=summary,
            )
        except ActivityError as e:  # it kept failing (or the instance went away)
            return Ran(ok=False, phase="boot", output=str(e.cause or e)[:512])
        return ran
