"""The worker's one runner of a pass: its steps, its status, and its re-checks.

A workflow hands a pass to one of two activities (docs/engine.md): ``run_pass`` (the
steps one after the other, then the status) or ``load_and_run_pass`` (the load first,
then the same, when the load finds the instance as the workflow expected). Both are
``Passes`` methods, over the steps the worker hosts. A pass that settles the instance
(``dbi.passes.settled``) or waits on a transition the watcher announces
(``dbi.passes.awaits``) is handed to the worker's re-checks (``activities.worker.rechecks``),
which repeat it with ``Passes.recheck``: the same steps, read-only.

Three modes of reading, one runner:

- fresh (a woken pass): every read goes to the API server, each object once a pass
  (``activities.infra.reads.shared_reads``);
- idle (a pass nothing woke): reads the worker views are answered from the views; a
  step that would act then raises ``Stale`` before anything is written, and the pass
  runs again fresh;
- re-check: as idle, and a step that would act is a difference to report, not a pass
  to run again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from temporalio import activity

from activities.infra.context import Context, Settles
from activities.infra.postgres import shared_sessions
from activities.infra.reads import Stale, rests_on_views, shared_reads
from activities.worker.instance import LoadInstance
from activities.worker.status import WriteStatus
from activities.worker.telemetry import measured
from dbi import pipeline
from dbi.messages import AWAIT_NET, RECHECK_NET
from dbi.passes import LoadedPass, LoadedPassInput, PassInput, awaits, settled, then_write
from dbi.steps import (
    InstanceSnapshot,
    Outcome,
    StepInput,
    StepResult,
    StepsInput,
    StepsResult,
    in_order,
)

StepActivity = Callable[[StepInput], StepResult]


class Passes:
    """Run the passes a workflow hands the worker, over ``steps`` (the step activities by
    name); hand those that settle to ``rechecks`` (default: the Context's; None: the
    worker re-checks nothing)."""

    def __init__(
        self,
        ctx: Context,
        steps: Mapping[str, StepActivity],
        rechecks: Settles | None = None,
    ) -> None:
        self.steps = steps
        self.load: Callable[[StepInput], InstanceSnapshot] = LoadInstance(ctx).run
        self.status = WriteStatus(ctx)
        self.rechecks = rechecks if rechecks is not None else ctx.rechecks
        self._forget = ctx.passes.forget

    @activity.defn(name=pipeline.RUN_PASS)
    def run_pass(self, given: PassInput) -> StepsResult:
        """The pass's steps, then, when none raised, its status; a pass given what its
        load found (``PassInput.settle``) that settles the instance goes to the re-checks."""
        done = then_write(given.then, self.run_steps(given.steps), self.status.after_steps)
        if (snapshot := given.settle) is None:
            return done
        if self._settle(given.rechecked(snapshot), LoadedPass(snapshot=snapshot, done=done)):
            return done.model_copy(update={"rechecked": True})
        return done

    @activity.defn(name=pipeline.LOAD_AND_RUN_PASS)
    def load_and_run_pass(self, loaded: LoadedPassInput) -> LoadedPass:
        """The pass's load; when it finds the snapshot the workflow expected, the pass
        (``run_pass``); anything else and nothing runs: the workflow decides afresh."""
        snapshot = self.load(loaded.load)
        if snapshot != loaded.expected:
            return LoadedPass(snapshot=snapshot)
        ran = LoadedPass(snapshot=snapshot, done=self.run_pass(loaded.then))
        if self._settle(loaded.rechecked(), ran):
            return ran.model_copy(update={"rechecked": True})
        return ran

    def run_steps(self, given: StepsInput) -> StepsResult:
        """The steps one after the other while the pass goes on, sharing what they read.
        An idle pass reads from the views; when one of its steps would act, the pass
        runs again, every read fresh, before anything is written (``Stale``)."""
        each = measured(lambda step, one: self.steps[step](one))
        if given.step_input.idle:
            try:
                with shared_reads(idle=True), shared_sessions():
                    return in_order(given, each)
            except Stale:
                activity.logger.info("an idle pass would act: running it on fresh reads")
        with shared_reads(), shared_sessions():
            return in_order(given, each)

    def recheck(self, loaded: LoadedPassInput) -> str | None:
        """Look at the instance as the settled pass ``loaded`` did, acting on nothing;
        None when it is as that pass left it, else what differs.

        The load and steps read as an idle pass does, and every decision rests on that
        (``rests_on_views``): a step that would act raises ``Stale`` before it writes
        anything, as does any write through the worker's client. What the re-check read
        is forgotten after."""
        try:
            return self._differs(loaded)
        finally:
            self._forget(loaded.load.pass_id)

    def _differs(self, loaded: LoadedPassInput) -> str | None:
        if self.load(loaded.load) != loaded.expected:
            return "the instance changed"
        try:
            with shared_reads(idle=True), shared_sessions():
                rests_on_views()
                done = in_order(loaded.then.steps, lambda step, one: self.steps[step](one))
        except Stale:
            return "a step would act"
        if done.raised is not None:
            return f"{done.raised} raised"
        for result in done.results:
            # A transition still under way (``awaits``) is what its pass found; any
            # change in it shows in the status.
            if result.outcome is not Outcome.SATISFIED and not result.announced:
                return f"{result.step} is {result.outcome.value}: {result.reason}"
        if not self.status.unchanged(loaded.then.then.after(done.results)):
            return "the status would change"
        return None

    def _settle(self, loaded: LoadedPassInput, ran: LoadedPass) -> bool:
        """Whether the re-checks took on the pass ``ran``: one that settled the instance
        (re-checked every healthCheckInterval until ``RECHECK_NET``), or one that waits
        on an announced transition (looked at every hint until ``AWAIT_NET``)."""
        if self.rechecks is None:
            return False
        workflow_id = activity.info().workflow_id or ""
        if settled(loaded, ran):
            return self.rechecks.settle(
                workflow_id, loaded, self.recheck, RECHECK_NET.total_seconds()
            )
        every = awaits(loaded, ran)
        if every is None:
            return False
        return self.rechecks.settle(
            workflow_id, loaded, self.recheck, AWAIT_NET.total_seconds(), every
        )
