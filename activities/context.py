"""What every step activity is given: the Kubernetes access and the configuration."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kubernetes import client as k8s
from temporalio import activity

from activities.events import emit
from activities.kube import Instance, Kube, namespace_terminating
from dbi.config import Config
from dbi.status import Event
from dbi.steps import Outcome, StepInput, StepResult


class PassReads:
    """The instance each recent pass's load read, by pass id, in this process.

    A pass reads its DBInstance once, at its start (``load_instance``); its steps start
    from that read instead of each reading the instance again, as a controller's
    reconcile reads its object once and hands it to each step. A step that acts reads
    afresh and records what it read, so the steps after it see the change. Only the
    ``size`` most recent passes are kept; a pass not found (another worker ran its load,
    or the worker restarted since) makes the step read the instance itself. A step that
    raises forgets its pass's read: its retry, and the steps after it, read afresh (the
    read may be why it raised: a conflict, an instance deleted since).
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._reads: OrderedDict[str, Instance] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, pass_id: str, instance: Instance) -> None:
        if not pass_id:
            return
        with self._lock:
            self._reads[pass_id] = instance
            self._reads.move_to_end(pass_id)
            while len(self._reads) > self._size:
                self._reads.popitem(last=False)

    def forget(self, pass_id: str) -> None:
        with self._lock:
            self._reads.pop(pass_id, None)

    def recall(self, step_input: StepInput) -> Instance | None:
        """The instance the step's pass read, if this process has it and it is the one
        the step is for (same UID)."""
        if not step_input.pass_id:
            return None
        with self._lock:
            found = self._reads.get(step_input.pass_id)
        return found if found is not None and found.uid == step_input.uid else None


@dataclass(frozen=True)
class Context:
    kube: Kube
    config: Config
    passes: PassReads = field(default_factory=PassReads)


# The requeue hint of a step that has just changed something: the change is observed
# at once (the API server reads back its own writes), with no timer. ``Step.on`` looks
# again itself, within the same activity, up to LOOK_AGAIN times; a hint still
# AT_ONCE after that goes to the workflow, whose next pass starts without a timer.
AT_ONCE = 0.0
LOOK_AGAIN = 6
# The reasons any step may report (besides the pass's StepFailed, workflows/pipeline.py).
INSTANCE_GONE = "InstanceGone"
NAMESPACE_TERMINATING = "NamespaceTerminating"
# A step that may not create in a namespace being deleted waits this long; its next pass
# finds the instance deleted too (the namespace's deletion deletes it) and tears it down.
NAMESPACE_TERMINATING_WAIT = 1.0


def result(
    step: str,
    condition: str,
    outcome: Outcome,
    reason: str,
    message: str,
    *,
    requeue_after: float | None = None,
    **facts: object,
) -> StepResult:
    """Return a StepResult; ``facts`` are the typed fields of ``dbi.steps.Facts``."""
    return StepResult.model_validate(
        {
            "step": step,
            "outcome": outcome,
            "condition_type": condition,
            "reason": reason,
            "message": message,
            "requeue_after_seconds": requeue_after,
            "facts": facts,
        }
    )


def load(ctx: Context, step_input: StepInput) -> Instance | None:
    """Read the step's instance; None when it is gone or is another object of the same name.

    What is read is remembered as the pass's instance (``PassReads``).
    """
    instance = ctx.kube.instance(step_input.namespace, step_input.name)
    if instance is None or instance.uid != step_input.uid:
        return None
    ctx.passes.remember(step_input.pass_id, instance)
    return instance


def gone(step: str, condition: str) -> StepResult:
    """The result of a step whose instance disappeared: the next load ends the workflow."""
    return result(step, condition, Outcome.PENDING, INSTANCE_GONE, "The instance is gone.")


def terminating(step: str, condition: str) -> StepResult:
    """The result of a step refused because the instance's namespace is being deleted: no
    use retrying; the next pass tears the instance down."""
    return result(
        step,
        condition,
        Outcome.PENDING,
        NAMESPACE_TERMINATING,
        "The namespace is being deleted; the instance will be torn down.",
        requeue_after=NAMESPACE_TERMINATING_WAIT,
    )


class Activity:
    """Base of the activity classes: the Context they run with."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx


class Step(Activity):
    """A step activity: ``converge`` runs on the step's instance, when it still exists."""

    def on(self, step_input: StepInput, step: str, condition: str) -> StepResult:
        """Converge the instance as its pass read it (or as read now, when this process
        does not have the pass's read); a gone instance is reported as such.

        A step that has just acted (Pending, AT_ONCE) reads the instance again and
        observes again at once: the result is always that of a fresh observation, and a
        step that takes a few quick actions in a row (a role, then its database, then
        the password) takes them in one activity instead of one pass each.
        """
        instance = self.ctx.passes.recall(step_input)
        for look in range(LOOK_AGAIN):
            if look or instance is None:
                instance = load(self.ctx, step_input)
            if instance is None:
                return gone(step, condition)
            try:
                outcome = self.converge(instance, step_input)
            except BaseException as e:
                self.ctx.passes.forget(step_input.pass_id)
                if isinstance(e, k8s.ApiException) and namespace_terminating(e):
                    return terminating(step, condition)
                raise
            if not _acted(outcome):
                break
            self._announce(instance, outcome)
        return outcome

    def _announce(self, instance: Instance, acted: StepResult) -> None:
        """Log the action and record it as a Normal Event (best effort, like all Events)."""
        activity.logger.info("%s acted (%s): %s", acted.step, acted.reason, acted.message)
        message = f"{acted.condition_type}: {acted.message}"
        emit(
            self.ctx.kube,
            instance,
            Event(type="Normal", reason=acted.reason, message=message),
            datetime.now(UTC).replace(microsecond=0),
        )

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        raise NotImplementedError


def _acted(outcome: StepResult) -> bool:
    return outcome.outcome is Outcome.PENDING and outcome.requeue_after_seconds == AT_ONCE
