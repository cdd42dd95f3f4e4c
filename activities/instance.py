"""load_instance: what the workflow needs to know of its DBInstance before a pass."""

from __future__ import annotations

from dataclasses import replace

from temporalio import activity

from activities.kube import Instance, shared_reads, viewed
from activities.step import Activity
from dbi import names, pipeline
from dbi.models import Served
from dbi.spec import duration_seconds
from dbi.steps import InstanceSnapshot, StepInput

# The day-2 requests a DBInstance's annotations make, by the status.served field that
# records each one's value once served.
REQUESTS = {
    "reconcile_requested_at": names.RECONCILE_REQUESTED_AT,
    "restart_requested_at": names.RESTART_REQUESTED_AT,
    "rotate_requested_at": names.ROTATE_REQUESTED_AT,
    "rotate_admin_requested_at": names.ROTATE_ADMIN_REQUESTED_AT,
    "backup_requested_at": names.BACKUP_REQUESTED_AT,
}


class LoadInstance(Activity):
    @activity.defn(name=pipeline.LOAD_INSTANCE)
    def run(self, step_input: StepInput) -> InstanceSnapshot:
        """Read the DBInstance; a missing one is ``exists=False`` (the workflow then ends).

        The read is the pass's: its steps start from it (``PassReads``). An idle pass's
        comes from the worker's views when they say the instance has not changed. The
        workflow runs a pass: the worker's re-checks of its instance stop
        (``activities.rechecks``).
        """
        if self.ctx.rechecks is not None and activity.in_activity():
            self.ctx.rechecks.forget(activity.info().workflow_id or "")
        with shared_reads(idle=step_input.idle):
            instance = self.ctx.kube.instance(step_input.namespace, step_input.name)
            from_views = viewed()
        if instance is None:
            return InstanceSnapshot(exists=False)
        instance = replace(instance, viewed=from_views)
        self.ctx.passes.remember(step_input.pass_id, instance)
        spec = instance.model.spec
        return InstanceSnapshot(
            exists=True,
            uid=instance.uid,
            generation=instance.generation,
            deleting=instance.deleting,
            power_state=spec.power_state,
            health_check_interval_seconds=duration_seconds(spec.health_check_interval),
            paused=paused(instance),
            unserved=unserved(instance),
        )


def paused(instance: Instance) -> bool:
    """Whether dbi.dev/paused holds the instance's actions (the value "true", any case)."""
    return instance.annotations.get(names.PAUSED_ANNOTATION, "").strip().lower() == "true"


def unserved(instance: Instance) -> Served:
    """The requests whose annotation value is set and differs from the one served."""
    served = instance.model.status.served or Served()
    annotations = instance.annotations
    return Served.model_validate(
        {
            field: value
            for field, key in REQUESTS.items()
            if (value := annotations.get(key)) and value != getattr(served, field)
        }
    )
