"""The operator commands of the ``dbi`` CLI: status, describe, rotate, resize --force,
retry.

They read DBInstances from Kubernetes as kubectl does (``--kubeconfig``, else
``KUBECONFIG``, else ``~/.kube/config``, else the pod's ServiceAccount; ``--context``;
the namespace from ``-n``, else the context's) and talk to each instance's workflow in
Temporal (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, or a profile); the Temporal UI
link uses ``DBI_TEMPORAL_UI`` (default http://127.0.0.1:8233). ``status`` and
``describe`` show the Kubernetes side when Temporal does not answer, and say so.

Exit codes a script can rely on: 0 done, 1 failed (an API or Temporal error; status
and describe still print what Kubernetes holds), 2 bad usage, 3 no such instance,
4 the workflow refused or could not do it, 5 not finished within ``--timeout`` (the
workflow goes on with it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from commands import target
from commands.cluster import Kube, parameters_line, read_instance
from dbi import environment, names
from dbi.messages import (
    Progress,
    ResizeResult,
    RotationResult,
)

OK, FAILED, USAGE, NOT_FOUND, REFUSED, TIMED_OUT = 0, 1, 2, 3, 4, 5
T = TypeVar("T")
# How long status and describe wait for Temporal before showing Kubernetes alone, and
# for a workflow's progress (a worker answers the query).
TEMPORAL_CONNECT_SECONDS = 10.0
QUERY_SECONDS = 5.0
# How often a command that waits for its workflow says what the workflow is doing.
PROGRESS_SECONDS = 5.0


@dataclass(frozen=True)
class Answer:
    """What a command prints (``text``, or ``data`` for ``-o json|yaml``), the exit code
    it ends with, and a ``warning`` for stderr when the answer is partial."""

    code: int
    text: str
    data: Any = None
    warning: str | None = None


async def temporal_client(kube: Kube) -> Client:
    return await target.resolve(kube).connect()


async def client_or_why(kube: Kube) -> tuple[Client | None, str | None]:
    """A Temporal client, or None and why not (for commands that can do without)."""
    try:
        return await asyncio.wait_for(temporal_client(kube), TEMPORAL_CONNECT_SECONDS), None
    except (RuntimeError, TimeoutError) as e:
        chosen = target.resolve(kube)
        why = str(e) or f"no answer within {TEMPORAL_CONNECT_SECONDS:.0f}s"
        return None, (
            f"dbi: Temporal at {chosen.address} ({chosen.source}) did not answer ({why}); "
            "shown: what Kubernetes holds, the workflow's side unknown"
        )


def ui_link(kube: Kube, namespace: str, name: str) -> str:
    base = (environment.TEMPORAL_UI.value()).rstrip("/")
    temporal_namespace = target.resolve(kube).namespace
    workflow = urllib.parse.quote(names.workflow_id(namespace, name), safe="")
    return f"{base}/namespaces/{temporal_namespace}/workflows/{workflow}"


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions", []):
        if c["type"] == kind:
            return cast(dict[str, Any], c)
    return {}


@dataclass(frozen=True)
class _Seen:
    """What the workflow's progress query gave: its answer, or why there is none."""

    progress: Progress | None = None
    unanswered: str | None = None  # it runs (or may), but no answer came


async def _progress(client: Client, namespace: str, name: str) -> _Seen:
    """The workflow's progress; a query no worker answers in QUERY_SECONDS (the workers
    are down) is said so rather than waited on."""
    handle = client.get_workflow_handle(names.workflow_id(namespace, name))
    try:
        progress: Progress = await handle.query(
            names.PROGRESS, result_type=Progress, rpc_timeout=timedelta(seconds=QUERY_SECONDS)
        )
    except RPCError as e:
        if e.status is RPCStatusCode.NOT_FOUND:
            return _Seen()
        return _Seen(unanswered=f"no answer to the progress query ({e.message})")
    return _Seen(progress)


def table(rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(line.rstrip() for line in lines)


async def status(kube: Kube, namespace: str | None, name: str | None) -> Answer:
    """One line per instance: phase, Ready, the step holding it, the workflow's progress
    (``namespace`` None: every namespace)."""
    if name is not None and namespace is None:
        return Answer(USAGE, "dbi: NAME and -A do not go together (as in kubectl); give -n")
    if name is not None:
        assert namespace is not None
        one = read_instance(kube, namespace, name)
        if one is None:
            return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
        items = [one]
    elif namespace is None:
        listed = kube.objects().list_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL)
        items = cast(dict[str, Any], listed)["items"]
    else:
        listed = kube.objects().list_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL
        )
        items = cast(dict[str, Any], listed)["items"]
    client, unreachable = await client_or_why(kube)
    found: list[dict[str, Any]] = []
    for obj in items:
        meta = obj["metadata"]
        seen = await _progress(client, meta["namespace"], meta["name"]) if client else _Seen()
        progress = seen.progress
        step = progress.summary.step if progress and progress.summary else ""
        found.append(
            {
                "namespace": meta["namespace"],
                "name": meta["name"],
                "phase": (obj.get("status") or {}).get("phase"),
                "ready": _condition(obj, "Ready").get("status", "Unknown"),
                "step": step or None,  # None: no step holds it (or no workflow)
                "workflow": _workflow(meta["namespace"], meta["name"], client, seen),
            }
        )
    rows = [("NAMESPACE", "NAME", "PHASE", "READY", "STEP", "PASSES", "WORKFLOW")]
    for i in found:
        workflow = i["workflow"]
        rows.append(
            (
                i["namespace"],
                i["name"],
                i["phase"] or "-",
                i["ready"],
                i["step"] or "-",
                "-" if workflow["passes"] is None else str(workflow["passes"]),
                _workflow_text(workflow),
            )
        )
    code = FAILED if unreachable else OK
    return Answer(code, table(rows), {"items": found}, unreachable)


def _workflow(namespace: str, name: str, client: Client | None, seen: _Seen) -> dict[str, Any]:
    """The workflow's side, as data: ``running`` None when unknown (Temporal or its
    workers did not answer; ``unanswered`` says which)."""
    progress = seen.progress
    unknown = client is None or seen.unanswered is not None
    return {
        "id": names.workflow_id(namespace, name),
        "running": None if unknown else progress is not None,
        "passes": progress.passes if progress else None,
        "waitingFor": progress.waiting_for if progress else None,
        "unanswered": "Temporal did not answer" if client is None else seen.unanswered,
    }


def _workflow_text(workflow: dict[str, Any]) -> str:
    if workflow["running"] is None:
        return f"unknown ({workflow['unanswered']})"
    if not workflow["running"]:
        return "no workflow"
    return str(workflow["waitingFor"] or "in a pass")


async def describe(kube: Kube, namespace: str, name: str) -> Answer:
    """Every condition with its reason and message, the endpoint and the workflow."""
    obj = read_instance(kube, namespace, name)
    if obj is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    status_ = obj.get("status") or {}
    endpoint = status_.get("endpoint") or {}
    observed = status_.get("observed") or {}
    client, unreachable = await client_or_why(kube)
    seen = await _progress(client, namespace, name) if client else _Seen()
    workflow = _workflow(namespace, name, client, seen)
    data = {
        "namespace": namespace,
        "name": name,
        "phase": status_.get("phase"),
        "generation": obj["metadata"].get("generation"),
        "observedGeneration": status_.get("observedGeneration"),
        "endpoint": endpoint or None,
        "credentialsSecretName": status_.get("credentialsSecretName"),
        "parameters": observed.get("parameters"),
        "pendingRestart": observed.get("pendingRestart"),
        "conditions": status_.get("conditions", []),
        "workflow": workflow,
        "temporal": dataclasses.asdict(target.resolve(kube)),
        "temporalUI": ui_link(kube, namespace, name),
    }
    lines = [
        f"DBInstance {namespace}/{name}",
        f"  phase        {status_.get('phase', '-')}",
        f"  generation   {obj['metadata'].get('generation')} "
        f"(observed {status_.get('observedGeneration', '-')})",
        f"  endpoint     {endpoint.get('host', '-')}:{endpoint.get('port', '-')}",
        f"  credentials  Secret {status_.get('credentialsSecretName', '-')}",
        *parameters_line(observed),
        "  conditions:",
    ]
    for c in status_.get("conditions", []):
        lines.append(f"    {c['type']:<16} {c['status']:<7} {c['reason']}: {c['message']}")
    if workflow["running"]:
        lines.append(
            f"  workflow     {workflow['id']}: {workflow['passes']} passes, "
            f"{workflow['waitingFor'] or 'in a pass'}"
        )
    elif workflow["running"] is None:
        lines.append(f"  workflow     {workflow['id']}: {_workflow_text(workflow)}")
    else:
        lines.append(f"  workflow     {workflow['id']}: not running")
    lines.append(f"  Temporal     {target.resolve(kube)}")
    lines.append(f"  Temporal UI  {data['temporalUI']}")
    return Answer(FAILED if unreachable else OK, "\n".join(lines), data, unreachable)


async def _update(
    kube: Kube,
    namespace: str,
    name: str,
    update: str,
    result_type: type[T],
    timeout: float | None = None,
) -> T | Answer:
    """Run a workflow update and wait for its result (at most ``timeout`` seconds); an
    Answer when it cannot."""
    if read_instance(kube, namespace, name) is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    client = await temporal_client(kube)
    handle = client.get_workflow_handle(names.workflow_id(namespace, name))
    print(f"{update}: {namespace}/{name}, waiting for its workflow", file=sys.stderr, flush=True)
    reporting = asyncio.create_task(_report(client, namespace, name))
    try:
        result: T = await asyncio.wait_for(
            handle.execute_update(update, result_type=result_type), timeout
        )
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        # Cancelled at the timeout, the SDK raises its own error, not TimeoutError; so it
        # does when Ctrl-C cancels the command, which is no timeout.
        if (task := asyncio.current_task()) is not None and task.cancelling():
            raise asyncio.CancelledError from None
        within = f"within {timeout:g}s" if timeout is not None else "in time"
        return Answer(
            TIMED_OUT,
            f"dbi: {update} did not finish {within}; the workflow goes on with it "
            f"(dbi describe {name} -n {namespace})",
        )
    except WorkflowUpdateFailedError as e:
        return Answer(REFUSED, f"dbi: {update} refused: {e.cause}")
    except RPCError as e:
        return Answer(FAILED, f"dbi: {update} failed: {e.message}")
    finally:
        reporting.cancel()
    return result


async def _report(client: Client, namespace: str, name: str) -> None:
    """Print what the workflow is doing, at once and every PROGRESS_SECONDS after, while a
    command waits for it."""
    started = asyncio.get_running_loop().time()
    while True:
        seen = await _progress(client, namespace, name)
        progress = seen.progress
        if progress is None:
            doing = seen.unanswered or "its workflow is not running"
        else:
            step = progress.summary.step if progress.summary else ""
            doing = f"pass {progress.passes}{f', {step}' if step else ''}: {progress.waiting_for}"
        elapsed = asyncio.get_running_loop().time() - started
        print(f"  {elapsed:4.0f}s {doing}", file=sys.stderr, flush=True)
        await asyncio.sleep(PROGRESS_SECONDS)


async def rotate(
    kube: Kube, namespace: str, name: str, *, admin: bool = False, timeout: float | None = None
) -> Answer:
    """Rotate the app password (``admin``: dbi's admin password) through the workflow's
    update; wait for the result (at most ``timeout`` seconds)."""
    update = names.ROTATE_ADMIN_CREDENTIALS if admin else names.ROTATE_CREDENTIALS
    result = await _update(kube, namespace, name, update, RotationResult, timeout)
    if isinstance(result, Answer):
        return result
    if admin:
        return Answer(OK, f"rotated: dbi's admin password (kept in {result.secret_name})")
    return Answer(OK, f"rotated: Secret {result.secret_name} holds the new password")


async def resize(kube: Kube, namespace: str, name: str, *, timeout: float | None = None) -> Answer:
    """Allow a resize that needs a restart now; wait until the size is synced or refused
    (at most ``timeout`` seconds)."""
    result = await _update(kube, namespace, name, names.FORCE_RESIZE, ResizeResult, timeout)
    if isinstance(result, Answer):
        return result
    text = f"{'resized' if result.resized else 'not resized'}: {result.reason}: {result.message}"
    return Answer(OK if result.resized else REFUSED, text)


async def retry(kube: Kube, namespace: str, name: str) -> Answer:
    """Signal the workflow to run a pass now, out of any wait (a Terminal one too)."""
    if read_instance(kube, namespace, name) is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    handle = (await temporal_client(kube)).get_workflow_handle(names.workflow_id(namespace, name))
    try:
        await handle.signal(names.RETRY)
    except RPCError as e:
        return Answer(FAILED, f"dbi: retry failed: {e.message}")
    return Answer(
        OK, f"retry: {namespace}/{name} runs a pass now (dbi describe {name} -n {namespace})"
    )
