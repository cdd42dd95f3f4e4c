"""The operator commands of the ``dbi`` CLI: status, describe, rotate, resize --force.

They read DBInstances from Kubernetes (``KUBECONFIG``) and talk to each instance's
workflow in Temporal (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``); the Temporal UI
link uses ``DBI_TEMPORAL_UI`` (default http://127.0.0.1:8233).

Exit codes a script can rely on: 0 done, 1 failed (an API or Temporal error),
2 bad usage, 3 no such instance, 4 the workflow refused or could not do it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubernetes import client as k8s
from temporalio.client import Client, WorkflowUpdateFailedError
from temporalio.service import RPCError

from dbi import connect, environment, names
from dbi.messages import (
    Progress,
    ResizeResult,
    RotationResult,
)

OK, FAILED, USAGE, NOT_FOUND, REFUSED = 0, 1, 2, 3, 4
T = TypeVar("T")


@dataclass(frozen=True)
class Answer:
    """What a command prints, and the exit code it ends with."""

    code: int
    text: str


def _objects() -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(connect.kubernetes())


def _client() -> Any:
    return connect.temporal()


def ui_link(namespace: str, name: str) -> str:
    base = (environment.TEMPORAL_UI.value()).rstrip("/")
    temporal_namespace = connect.temporal_settings()["namespace"]
    workflow = urllib.parse.quote(names.workflow_id(namespace, name), safe="")
    return f"{base}/namespaces/{temporal_namespace}/workflows/{workflow}"


def _get(namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return cast(
            dict[str, Any],
            _objects().get_namespaced_custom_object(
                names.GROUP, names.VERSION, namespace, names.PLURAL, name
            ),
        )
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions", []):
        if c["type"] == kind:
            return cast(dict[str, Any], c)
    return {}


async def _progress(client: Client, namespace: str, name: str) -> Progress | None:
    handle = client.get_workflow_handle(names.workflow_id(namespace, name))
    try:
        progress: Progress = await handle.query(names.PROGRESS, result_type=Progress)
    except RPCError:
        return None
    return progress


async def status(namespace: str | None, name: str | None) -> Answer:
    """One line per instance: phase, Ready, the step holding it, the workflow's progress."""
    if name is not None:
        found = _get(namespace or "default", name)
        if found is None:
            return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace or 'default'}/{name}")
        items = [found]
    elif namespace is None:
        listed = _objects().list_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL)
        items = cast(dict[str, Any], listed)["items"]
    else:
        listed = _objects().list_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL
        )
        items = cast(dict[str, Any], listed)["items"]
    client = await _client()
    rows = [("NAMESPACE", "NAME", "PHASE", "READY", "STEP", "PASSES", "WORKFLOW")]
    for obj in items:
        meta = obj["metadata"]
        ready = _condition(obj, "Ready")
        progress = await _progress(client, meta["namespace"], meta["name"])
        step = progress.summary.step if progress and progress.summary else "-"
        rows.append(
            (
                meta["namespace"],
                meta["name"],
                (obj.get("status") or {}).get("phase", "-"),
                ready.get("status", "Unknown"),
                step or "-",
                str(progress.passes) if progress else "-",
                progress.waiting_for if progress else "no workflow",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return Answer(OK, "\n".join(line.rstrip() for line in lines))


async def describe(namespace: str, name: str) -> Answer:
    """Every condition with its reason and message, the endpoint and the workflow."""
    obj = _get(namespace, name)
    if obj is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    status_ = obj.get("status") or {}
    endpoint = status_.get("endpoint") or {}
    lines = [
        f"DBInstance {namespace}/{name}",
        f"  phase        {status_.get('phase', '-')}",
        f"  generation   {obj['metadata'].get('generation')} "
        f"(observed {status_.get('observedGeneration', '-')})",
        f"  endpoint     {endpoint.get('host', '-')}:{endpoint.get('port', '-')}",
        f"  credentials  Secret {status_.get('credentialsSecretName', '-')}",
        "  conditions:",
    ]
    for c in status_.get("conditions", []):
        lines.append(f"    {c['type']:<16} {c['status']:<7} {c['reason']}: {c['message']}")
    progress = await _progress(await _client(), namespace, name)
    if progress is not None:
        lines += [
            f"  workflow     {names.workflow_id(namespace, name)}: {progress.passes} passes, "
            f"{progress.waiting_for or 'in a pass'}",
        ]
    else:
        lines.append(f"  workflow     {names.workflow_id(namespace, name)}: not running")
    lines.append(f"  Temporal UI  {ui_link(namespace, name)}")
    return Answer(OK, "\n".join(lines))


async def _update(namespace: str, name: str, update: str, result_type: type[T]) -> T | Answer:
    """Run a workflow update and wait for its result; an Answer when it cannot."""
    if _get(namespace, name) is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    handle = (await _client()).get_workflow_handle(names.workflow_id(namespace, name))
    try:
        result: T = await handle.execute_update(update, result_type=result_type)
    except WorkflowUpdateFailedError as e:
        return Answer(REFUSED, f"dbi: {update} refused: {e.cause}")
    except RPCError as e:
        return Answer(FAILED, f"dbi: {update} failed: {e.message}")
    return result


async def rotate(namespace: str, name: str, *, admin: bool = False) -> Answer:
    """Rotate the app password (``admin``: dbi's admin password) through the workflow's
    update; wait for the result."""
    update = names.ROTATE_ADMIN_CREDENTIALS if admin else names.ROTATE_CREDENTIALS
    result = await _update(namespace, name, update, RotationResult)
    if isinstance(result, Answer):
        return result
    if admin:
        return Answer(OK, f"rotated: dbi's admin password (kept in {result.secret_name})")
    return Answer(OK, f"rotated: Secret {result.secret_name} holds the new password")


async def resize(namespace: str, name: str) -> Answer:
    """Allow a resize that needs a restart now; wait until the size is synced or refused."""
    result = await _update(namespace, name, names.FORCE_RESIZE, ResizeResult)
    if isinstance(result, Answer):
        return result
    text = f"{'resized' if result.resized else 'not resized'}: {result.reason}: {result.message}"
    return Answer(OK if result.resized else REFUSED, text)


async def retry(namespace: str, name: str) -> Answer:
    """Signal the workflow to run a pass now, out of any wait (a Terminal one too)."""
    if _get(namespace, name) is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    handle = (await _client()).get_workflow_handle(names.workflow_id(namespace, name))
    try:
        await handle.signal(names.RETRY)
    except RPCError as e:
        return Answer(FAILED, f"dbi: retry failed: {e.message}")
    return Answer(
        OK, f"retry: {namespace}/{name} runs a pass now (dbi describe {name} -n {namespace})"
    )
