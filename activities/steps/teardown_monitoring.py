"""teardown_monitoring (MonitoringRemoved): the metrics objects go with the instance.

Observes the metrics Service and ServiceMonitor; deletes those that are the instance's
(``activities.infra.ownership``: another's stays), Pending until they are gone. Idempotency
key: the names; deleting one already gone is fine.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from activities.infra import ownership, scrape
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import Anatomy
from dbi.pipeline import TEARDOWN_MONITORING as SPEC
from dbi.steps import Decision, StepInput

CHECK_SECONDS = 1.0


class Reason(StrEnum):
    REMOVED = "Removed"
    REMOVING = "Removing"


class Action(StrEnum):
    DELETE = "delete"


@dataclass(frozen=True, kw_only=True)
class Observation:
    ours: tuple[ownership.Child, ...]  # the instance's own metrics objects that exist


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    children = scrape.read(ctx, instance).children
    ours = tuple(c for c in children if ownership.classify(c, instance.uid) is ownership.Claim.OURS)
    return Observation(ours=ours)


def decide(obs: Observation) -> Decision[Action]:
    """Delete the instance's metrics objects until none is left (pure)."""
    if obs.ours:
        message = "The monitoring objects are being deleted."
        return SPEC.pending(Reason.REMOVING, message, Action.DELETE, after=CHECK_SECONDS)
    return SPEC.satisfied(Reason.REMOVED, "The monitoring objects are gone.")


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    for child in obs.ours:
        ctx.kube.delete(child.kind, instance.namespace, child.name)


STEP = Anatomy(SPEC, observe, decide, act)
