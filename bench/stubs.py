"""Steps stubbed at the activity boundary, so that the engine alone is measured
(``python -m bench --steps stub``).

Every converge step of ``dbi.pipeline.CONVERGE`` is replaced by an activity of the same
name that answers as the step of a settled instance would: Satisfied, with the facts
the real step reports (size, power, version, endpoint), read from the DBInstance the
pass loaded. No VM, no guest, no Secret: what remains is the engine's own work (the
watcher, the workflow and its history, the pass's load and status write, which stay
real) or the peer's. The teardown steps stay real, so a deleted instance still goes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio import activity

from activities.infra import secrets
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import gone, load
from activities.worker import registry
from activities.worker.passes import Passes
from dbi import pipeline
from dbi.pipeline import StepSpec
from dbi.steps import Outcome, StepInput, StepResult

STUBBED = "Stubbed"


def facts(spec: StepSpec, instance: Instance) -> dict[str, Any]:
    """The facts the real step reports of a settled instance."""
    model = instance.model.spec
    resources = model.resources
    known: dict[str, dict[str, Any]] = {
        pipeline.POWER.name: {"power_state": model.power_state},
        pipeline.RESIZE.name: {
            "cpu": resources.cpu,
            "memory": str(resources.memory),
            "storage": str(resources.storage),
        },
        pipeline.HEALTH.name: {"postgres_version": str(model.version)},
        pipeline.CREDENTIALS.name: {"credentials_secret_name": secrets.app_name(instance)},
        pipeline.ACCESS.name: {
            "endpoint_host": f"{instance.name}.{instance.namespace}.svc",
            "endpoint_port": 5432,
        },
    }
    return known.get(spec.name, {})


def stub(ctx: Context, spec: StepSpec) -> Callable[[StepInput], StepResult]:
    """The activity ``spec.name``: Satisfied, from the pass's read of the instance (read
    again, as a real step would, when this process does not have it)."""

    @activity.defn(name=spec.name)
    def run(step_input: StepInput) -> StepResult:
        instance = ctx.passes.recall(step_input) or load(ctx, step_input)
        if instance is None:
            return gone(spec)
        return spec.result(
            Outcome.SATISFIED, STUBBED, f"{spec.summary} (stubbed).", **facts(spec, instance)
        )

    return run


def activities(ctx: Context) -> list[Callable[..., Any]]:
    """Every activity the worker hosts, the converge steps stubbed (the runners,
    ``run_pass`` and ``load_and_run_pass``, run the stubs too)."""
    stubs = {spec.name: stub(ctx, spec) for spec in pipeline.CONVERGE}
    real = {_name(fn): fn for fn in registry.all_activities(ctx)}
    teardown = {spec.name: real[spec.name] for spec in pipeline.TEARDOWN}
    runners = registry.runners(Passes(ctx, {**stubs, **teardown}))
    kept = [fn for name, fn in real.items() if name not in {*stubs, *map(_name, runners)}]
    return [*stubs.values(), *runners, *kept]


def _name(fn: Callable[..., Any]) -> str:
    return str(activity._Definition.must_from_callable(fn).name)
