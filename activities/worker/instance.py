"""load_instance: what the workflow needs to know of its DBInstance before a pass."""

from __future__ import annotations

from dataclasses import replace

from temporalio import activity

from activities.infra.context import Activity
from activities.infra.reads import shared_reads, viewed
from dbi import pipeline
from dbi.steps import InstanceSnapshot, StepInput
from dbi.stored import snapshot


class LoadInstance(Activity):
    @activity.defn(name=pipeline.LOAD_INSTANCE)
    def run(self, step_input: StepInput) -> InstanceSnapshot:
        """Read the DBInstance; a missing one is ``exists=False`` (the workflow then ends).

        The read is the pass's: its steps start from it (``PassReads``). An idle pass's
        comes from the worker's views when they say the instance has not changed. The
        workflow runs a pass: the worker's re-checks of its instance stop
        (``activities.worker.rechecks``).
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
        return snapshot(
            instance.model,
            uid=instance.uid,
            generation=instance.generation,
            deleting=instance.deleting,
        )
