"""A Service carrying a note, and a step that acts on the note: what an idle pass
reads from the views, and when it reads afresh."""

from __future__ import annotations

from typing import Any

from kubernetes import client as k8s

from activities.infra.context import Context
from activities.infra.reads import shared_reads
from activities.steps.loop import Anatomy
from dbi import names, pipeline
from dbi.steps import Decision, Outcome, StepInput
from tests.activities.conftest import Counted

SPEC = pipeline.CONVERGE[0]


def service(namespace: str, name: str, labels: dict[str, str], note: str = "1") -> k8s.V1Service:
    return k8s.V1Service(
        metadata=k8s.V1ObjectMeta(name=name, labels=labels, annotations={"note": note}),
        spec=k8s.V1ServiceSpec(ports=[k8s.V1ServicePort(port=5432)]),
    )


def note(found: dict[str, Any] | None) -> str | None:
    return None if found is None else found["metadata"]["annotations"].get("note")


def idle_read(counted: Counted, namespace: str, name: str) -> tuple[Any, int]:
    def read() -> Any:
        with shared_reads(idle=True):
            return counted.kube.service(namespace, name)

    return counted.asked(read)


def note_step(namespace: str, acted: list[str]) -> Anatomy[Any, Any]:
    """A step that observes the note on the Service ``db`` of ``namespace``: Satisfied,
    but for the note "act", on which it acts (the action recorded in ``acted``), and the
    note "wait": Pending on a transition the watcher announces, as a VM starting is."""

    def observe(ctx: Context, instance: Any, step_input: StepInput) -> str | None:
        return note(ctx.kube.service(namespace, "db"))

    def decide(seen: str | None) -> Decision[str]:
        if seen == "act":
            return Decision(SPEC.result(Outcome.PENDING, "Acting", "acting"), "act")
        if seen == "wait":
            waiting = SPEC.result(
                Outcome.PENDING, "Starting", "starting", requeue_after_seconds=30, announced=True
            )
            return Decision(waiting)
        return Decision(SPEC.result(Outcome.SATISFIED, "Done", "nothing to do"))

    def act(ctx: Context, instance: Any, seen: str | None, action: str) -> None:
        acted.append(action)

    return Anatomy(SPEC, observe, decide, act)


def labels(core: k8s.CoreV1Api, namespace: str) -> dict[str, str]:
    found = core.read_namespaced_service("db", namespace).metadata
    return dict((found and found.labels) or {})


def create_instance(kube_api: Any, namespace: str) -> str:
    body = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": "db", "namespace": namespace},
        "spec": {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}},
    }
    created: Any = k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, body
    )
    return str(created["metadata"]["uid"])
