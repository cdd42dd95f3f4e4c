"""The bad-input corpus (tests/corpus.py) on the real stack.

Every manifest goes through the real API server's whole admission (a server-side dry
run, with kubectl's strict field validation): a refusal must name the field; an
accepted spec must be one the worker's model reads. Each accepted spec that reads
differently from the others is then created for real and must end as its case says
(Ready, or a reason naming the field) with no step failing and no workflow failed;
deleting them all must tear each one down.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections import Counter
from typing import Any, cast

import pytest
from kubernetes import client as k8s
from pydantic import ValidationError

from dbi import names
from dbi.spec import DBInstanceSpec
from dbi.steps import STEP_FAILED
from tests.corpus import Case, cases
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack
log = logging.getLogger(__name__)

# Both well under pytest's timeout, so a stuck case fails with the names of the stuck.
CONVERGE_SECONDS = 300.0
TEARDOWN_SECONDS = 180.0


def _create(objects: k8s.CustomObjectsApi, namespace: str, body: Any, **kwargs: Any) -> Any:
    return objects.create_namespaced_custom_object(
        names.GROUP,
        names.VERSION,
        namespace,
        names.PLURAL,
        body,
        field_validation="Strict",
        **kwargs,
    )


def _message(error: k8s.ApiException) -> str:
    try:
        return str(json.loads(error.body or "")["message"])
    except (ValueError, KeyError, TypeError):
        return str(error.body)


def _key(case: Case, stored: dict[str, Any], spec: DBInstanceSpec) -> str:
    """What a worker's pass sees of an accepted case: cases with the same key converge
    alike, so only the first runs."""
    meta = stored["metadata"]
    name = meta["name"]
    return json.dumps(
        [
            spec.model_dump(mode="json"),
            meta.get("annotations") or {},
            "" if name.startswith("c") and name[1:].isdigit() else name,
            case.expect,
        ],
        sort_keys=True,
    )


def _condition(db: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in db.get("status", {}).get("conditions", []):
        if c["type"] == kind:
            return cast(dict[str, Any], c)
    return None


def _ended(case: Case, db: dict[str, Any]) -> bool:
    """Whether the instance ended as its case says, for its current generation."""
    if db.get("status", {}).get("observedGeneration") != db["metadata"]["generation"]:
        return False
    kind, reason = case.expect
    found = _condition(db, kind)
    if found is None or found["reason"] != reason:
        return False
    if (kind, reason) == ("Ready", "Converged") and found["status"] != "True":
        return False
    if kind == "Stalled" and found["status"] != "True":
        return False
    return case.names is None or case.names in found["message"]


def _list(objects: k8s.CustomObjectsApi, namespace: str) -> list[dict[str, Any]]:
    listed = objects.list_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL
    )
    return cast(list[dict[str, Any]], cast(dict[str, Any], listed)["items"])


def _refusal_problem(case: Case, error: k8s.ApiException) -> str | None:
    message = _message(error)
    if error.status is None or error.status >= 500:
        return f"{case.id}: the API server failed ({error.status}): {message}"
    if case.field is None:
        return f"{case.id}: refused, expected accepted: {message}"
    if case.field not in message:
        return f"{case.id}: refused without naming {case.field}: {message}"
    return None


def _admit(
    objects: k8s.CustomObjectsApi, namespace: str, counts: Counter[str]
) -> tuple[list[str], dict[str, Case]]:
    """Dry-run every case; create the first accepted case of each key for real.
    Return the problems found and the instances created, by name."""
    problems: list[str] = []
    running: dict[str, Case] = {}
    keys: set[str] = set()
    for case in cases():
        body = copy.deepcopy(case.manifest)
        body["metadata"]["namespace"] = namespace
        counts["cases"] += 1
        try:
            stored = _create(objects, namespace, body, dry_run="All")
        except k8s.ApiException as e:
            counts["refused"] += 1
            if (problem := _refusal_problem(case, e)) is not None:
                problems.append(problem)
            continue
        counts["accepted"] += 1
        if case.field is not None:
            problems.append(f"{case.id}: accepted; expected a refusal naming {case.field}")
            continue
        try:
            spec = DBInstanceSpec.model_validate(stored["spec"])
        except ValidationError as e:
            problems.append(f"{case.id}: accepted, but the worker's model refuses it: {e}")
            continue
        key = _key(case, stored, spec)
        if case.converge and key not in keys:
            keys.add(key)
            _create(objects, namespace, body)
            running[body["metadata"]["name"]] = case
    return problems, running


async def _converge(
    objects: k8s.CustomObjectsApi, namespace: str, running: dict[str, Case]
) -> float:
    """Wait until every instance ended as its case says; return how long it took."""
    reasons: Counter[str] = Counter()
    started = time.monotonic()
    waiting = dict(running)
    while waiting and time.monotonic() - started < CONVERGE_SECONDS:
        await asyncio.sleep(2)
        for db in await asyncio.to_thread(_list, objects, namespace):
            reasons.update(c["reason"] for c in db.get("status", {}).get("conditions", []))
            case = waiting.get(db["metadata"]["name"])
            if case is not None and _ended(case, db):
                del waiting[db["metadata"]["name"]]
    stuck = {name: case.id for name, case in waiting.items()}
    assert not stuck, f"did not end as expected within {CONVERGE_SECONDS:.0f}s: {stuck}"
    assert reasons[STEP_FAILED] == 0, "a step kept raising on a corpus instance"
    return time.monotonic() - started


async def _tear_down(
    objects: k8s.CustomObjectsApi, namespace: str, running: dict[str, Case]
) -> None:
    """Delete every instance and wait until each is gone (its teardown ran)."""
    for name in running:
        await asyncio.to_thread(
            objects.delete_namespaced_custom_object,
            names.GROUP,
            names.VERSION,
            namespace,
            names.PLURAL,
            name,
        )
    started = time.monotonic()
    left = list(running)
    while left and time.monotonic() - started < TEARDOWN_SECONDS:
        await asyncio.sleep(2)
        left = [db["metadata"]["name"] for db in await asyncio.to_thread(_list, objects, namespace)]
    assert not left, f"not torn down within {TEARDOWN_SECONDS:.0f}s: {left}"


async def test_every_corpus_manifest_is_refused_naming_its_field_or_converges(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Each of the corpus's manifests is refused naming its field, or converges as its
    case says; then each is torn down; no workflow failed on the way."""
    objects = k8s.CustomObjectsApi(kube_api)
    counts: Counter[str] = Counter()
    problems, running = _admit(objects, namespace, counts)
    assert not problems, "\n".join(problems)
    assert counts["cases"] >= 200
    took = await _converge(objects, namespace, running)
    await _tear_down(objects, namespace, running)
    prefix = names.workflow_id(namespace, "")
    failed = [
        execution.id
        async for execution in orchestrator.client.list_workflows(
            f"WorkflowId STARTS_WITH '{prefix}' AND ExecutionStatus = 'Failed'"
        )
    ]
    assert failed == [], f"workflows failed: {failed}"
    log.warning(
        "corpus: %d cases, %d refused naming the field, %d accepted; %d distinct accepted "
        "specs ended as expected in %.0fs and were torn down",
        counts["cases"],
        counts["refused"],
        counts["accepted"],
        len(running),
        took,
    )
