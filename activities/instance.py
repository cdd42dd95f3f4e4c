"""load_instance: what the workflow needs to know of its DBInstance before a pass."""

from __future__ import annotations

from temporalio import activity

from activities.step import Activity
from dbi import pipeline
from dbi.spec import duration_seconds
from dbi.steps import InstanceSnapshot, StepInput


class LoadInstance(Activity):
    @activity.defn(name=pipeline.LOAD_INSTANCE)
    def run(self, step_input: StepInput) -> InstanceSnapshot:
        """Read the DBInstance; a missing one is ``exists=False`` (the workflow then ends).

        The read is the pass's: its steps start from it (``PassReads``).
        """
        instance = self.ctx.kube.instance(step_input.namespace, step_input.name)
        if instance is None:
            return InstanceSnapshot(exists=False)
        self.ctx.passes.remember(step_input.pass_id, instance)
        spec = instance.model.spec
        return InstanceSnapshot(
            exists=True,
            uid=instance.uid,
            generation=instance.generation,
            deleting=instance.deleting,
            power_state=spec.power_state,
            health_check_interval_seconds=duration_seconds(spec.health_check_interval),
        )
