"""The benchmark's stubbed steps (``--steps stub``), with plain data: the worker hosts the
same activities, each converge step answers as a settled instance's would, and a pass of
them makes the instance Ready with what the real steps would report."""

from __future__ import annotations

from typing import Any, cast

from temporalio import activity

from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from activities.worker import registry
from bench import stubs
from dbi import pipeline
from dbi.config import Config
from dbi.models import DBInstance, Phase
from dbi.spec import PowerState
from dbi.status import PassReport, summarize
from dbi.steps import Outcome, StepInput

UID = "uid-1"
RUN = "p1"  # the pass's id
APP_SECRET_NAME = "db-credentials"  # noqa: S105 (a name, the default one)


def instance() -> Instance:
    model = DBInstance.model_validate(
        {
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {
                "version": 17,
                "resources": {"cpu": 3, "memory": "2Gi", "storage": "5Gi"},
                "powerState": "Running",
            },
        }
    )
    return Instance(model=model, uid=UID, generation=4, deleting=False, finalizers=())


class NoKube:
    """Any read fails the test: a stub answers from the pass's read."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a stub asked the API server ({name})")


def context() -> Context:
    return Context(kube=cast(Kube, NoKube()), config=Config())


def names_of(activities: list[Any]) -> list[str]:
    return [str(activity._Definition.must_from_callable(fn).name) for fn in activities]


def test_the_stub_worker_hosts_every_activity_the_real_one_does() -> None:
    real = names_of(registry.all_activities(context()))
    stubbed = names_of(stubs.activities(context()))
    assert sorted(stubbed) == sorted(real)
    converge = {spec.name for spec in pipeline.CONVERGE}
    kept = [fn for fn in stubs.activities(context()) if names_of([fn])[0] not in converge]
    # The load, the status write, the teardown steps and the rest stay the real ones.
    assert {fn.__qualname__ for fn in kept} <= {
        fn.__qualname__ for fn in registry.all_activities(context())
    }


def test_a_pass_of_stubs_makes_the_instance_ready_with_the_real_facts() -> None:
    ctx = context()
    ctx.passes.remember(RUN, instance())
    step_input = StepInput(namespace="shop", name="db", uid=UID, pass_id=RUN)
    hosted = dict(zip(names_of(stubs.activities(ctx)), stubs.activities(ctx), strict=True))
    results = [hosted[spec.name](step_input) for spec in pipeline.CONVERGE]
    assert {r.outcome for r in results} == {Outcome.SATISFIED}
    assert [r.condition_type for r in results] == [s.condition_type for s in pipeline.CONVERGE]
    report = PassReport(
        workflow_id="w",
        generation=4,
        power_state=PowerState.RUNNING,
        pipeline=[s.reported for s in pipeline.CONVERGE],
        results=results,
    )
    assert summarize(report).ready and summarize(report).phase is Phase.RUNNING
    facts = {k: v for r in results for k, v in r.facts.model_dump().items() if v is not None}
    assert facts["cpu"] == 3 and facts["memory"] == "2Gi" and facts["storage"] == "5Gi"
    assert facts["postgres_version"] == "17"
    assert facts["power_state"] is PowerState.RUNNING
    assert facts["credentials_secret_name"] == APP_SECRET_NAME
