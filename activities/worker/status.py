"""write_status: the status subresource from one pass, and Events for transitions only.

Reads the status on the object (for lastTransitionTime and the transitions): the
pass's own read when this process made it (``PassReads``: the load's, or the read a
step made after acting), else from the API server. Derives the new one
(``dbi.status.derive``), patches the status subresource only when it differs (an idle
pass writes nothing), then emits an Event per changed condition. Retried after a
failure, it emits nothing twice: a retry reads from the API server, and so sees the
status a first try wrote. A deleted instance is tolerated, and
so is an Event the API refuses (a namespace being deleted, say): Events are best effort.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes import client as k8s
from temporalio import activity

from activities.infra.context import Activity
from activities.infra.events import emit
from activities.infra.kube import Instance
from dbi import metrics, names, pipeline
from dbi.models import DBInstanceStatus
from dbi.passes import StatusInput
from dbi.status import Event, derive
from dbi.steps import StepInput


class WriteStatus(Activity):
    @activity.defn(name=pipeline.WRITE_STATUS)
    def run(self, request: StatusInput) -> None:
        derived = self._derive(request)
        if derived is None:
            return
        instance, status, events, now = derived
        written = status.model_dump(mode="json", exclude_none=True)
        if written != _dumped(instance):
            try:
                self.ctx.kube.objects.patch_namespaced_custom_object_status(
                    names.GROUP,
                    names.VERSION,
                    instance.namespace,
                    names.PLURAL,
                    instance.name,
                    {"status": written},
                )
            except k8s.ApiException as e:
                if e.status == 404:
                    return
                raise
        _count(request, instance.model.status.converged_generation, status, datetime.now(UTC))
        for event in events:
            emit(self.ctx.kube, instance, event, now)  # best effort: the status is written

    def after_steps(self, request: StatusInput) -> bool:
        """Write the status as ``run_pass`` does after the pass's steps; False when that
        failed: the workflow then writes it with ``write_status``, which reads the
        instance afresh (the failed try may have written)."""
        try:
            self.run(request)
        except Exception as e:  # the workflow writes it: nothing is lost
            self.ctx.passes.forget(request.pass_id)
            activity.logger.warning(
                "the status write after the steps failed (%s); the workflow writes it",
                type(e).__name__,
            )
            return False
        return True

    def unchanged(self, request: StatusInput) -> bool:
        """Whether writing the pass's status would change nothing: the status on the
        object (as the pass read it) is the one it derives, with no Event to emit (a
        re-check's question, ``activities.worker.rechecks``)."""
        derived = self._derive(request)
        if derived is None:
            return False
        instance, status, events, _ = derived
        return not events and status.model_dump(mode="json", exclude_none=True) == _dumped(instance)

    def _derive(
        self, request: StatusInput
    ) -> tuple[Instance, DBInstanceStatus, list[Event], datetime] | None:
        """The instance as the pass read it, the status and Events its report derives,
        and when; None when the instance is gone or another one."""
        instance = self._read(request)
        if instance is None or instance.uid != request.uid:
            return None
        now = datetime.now(UTC).replace(microsecond=0)
        status, events = derive(instance.model.status, request.report, now=now)
        return instance, status, events, now

    def _read(self, request: StatusInput) -> Instance | None:
        """The pass's read of the instance, if this process has it; a retry reads afresh
        (a first try may have written)."""
        if not retried():
            step_input = StepInput(
                namespace=request.namespace,
                name=request.name,
                uid=request.uid,
                pass_id=request.pass_id,
            )
            if (found := self.ctx.passes.recall(step_input)) is not None:
                return found
        return self.ctx.kube.instance(request.namespace, request.name)


def _dumped(instance: Instance) -> dict[str, object]:
    """The status on the object, but for what the WAL archiver and the restore tests
    write (``archive``, ``restoreTest``): a pass neither derives nor writes them."""
    status = instance.model.status
    return status.model_dump(mode="json", exclude_none=True, exclude={"archive", "restore_test"})


def retried() -> bool:
    """Whether this is a retry of the activity (a first try may have written)."""
    return activity.in_activity() and activity.info().attempt > 1


def _count(
    request: StatusInput, before: int | None, status: DBInstanceStatus, now: datetime
) -> None:
    """Count the pass; time a generation's convergence the first time status shows it."""
    metrics.PASSES.labels(request.report.outcome).inc()
    generation = request.report.generation
    seen = request.generation_seen_at
    if status.converged_generation == generation and before != generation and seen is not None:
        metrics.GENERATION_READY_SECONDS.observe(max(0.0, (now - seen).total_seconds()))
