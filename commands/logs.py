"""`dbi logs NAME`: the worker's and the watcher's log lines about one instance, merged
in time order. They are read from the pods' logs through the API server, as ``kubectl
logs`` reads them: the pods labeled ``app.kubernetes.io/name`` dbi-worker or dbi-watcher
in ``--dbi-namespace``, each line a JSON object whose ``instance`` is ``NAMESPACE/NAME``
(docs/observability.md, "Logs"; lines in ``DBI_LOG_FORMAT=text`` are not read). It reads
what the pods still hold, so it needs the right to read ``pods/log`` there, as an
operator has; a tenant does not."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from commands import cluster
from commands.cluster import Kube, status_message
from commands.operate import FAILED, OK, Answer, table

PROCESSES = ("dbi-worker", "dbi-watcher")
SELECTOR = f"app.kubernetes.io/name in ({','.join(PROCESSES)})"
FIELDS = ("time", "level", "logger", "step", "message", "trace_id")


def add_parser(commands: Any, cluster_options: Callable[..., None], operate_: Any) -> None:
    parser = commands.add_parser(
        "logs",
        help="the worker's and watcher's log lines about an instance, in time order",
        description="Print the lines of the dbi-worker and dbi-watcher pods' logs (in "
        "--dbi-namespace) that are about NAME, merged in time order, with the pod each "
        "came from. Reads pods/log there, as `kubectl logs` does.",
    )
    cluster.instance_argument(parser, "the DBInstance (it may be deleted)")
    cluster_options(parser, output=True)
    parser.set_defaults(run=operate_(lambda a: logs(a.kube, a.namespace, a.name)))


async def logs(kube: Kube, namespace: str, name: str) -> Answer:
    """The lines about ``namespace/name`` in dbi's pods' logs, oldest first."""
    api = kube.api()
    core = k8s.CoreV1Api(api)
    listed = core.list_namespaced_pod(kube.home, label_selector=SELECTOR)
    pods = {
        pod["metadata"]["name"]: [c["name"] for c in pod["spec"]["containers"]]
        for pod in api.sanitize_for_serialization(listed)["items"]
    }
    if not pods:
        return Answer(
            FAILED,
            f"dbi: no {' or '.join(PROCESSES)} pods in namespace {kube.home} (where dbi is "
            "installed: --dbi-namespace)",
        )
    wanted = f"{namespace}/{name}"
    found: list[dict[str, Any]] = []
    unread: list[str] = []
    for pod, containers in sorted(pods.items()):
        for container in containers:
            try:
                response: Any = core.read_namespaced_pod_log(
                    pod, kube.home, container=container, _preload_content=False
                )
            except k8s.ApiException as e:
                unread.append(f"{pod}: {e.status} {status_message(e)}")
                continue
            text = response.data.decode(errors="replace")
            found += [
                {"pod": pod, **{f: record.get(f) for f in FIELDS}}
                for record in _records(text)
                if record.get("instance") == wanted
            ]
    found.sort(key=lambda line: str(line["time"] or ""))
    warning = "dbi: not read: " + "; ".join(unread) if unread else None
    code = FAILED if unread else OK
    if not found:
        return Answer(
            code,
            f"no lines about {wanted} in the logs of {_pods(len(pods))}",
            {"items": []},
            warning,
        )
    rows = [("TIME", "POD", "LEVEL", "STEP", "MESSAGE")]
    rows += [
        (
            str(f["time"]),
            f["pod"],
            str(f["level"]),
            f["step"] or "-",
            str(f["message"]).replace("\n", " "),
        )
        for f in found
    ]
    return Answer(code, table(rows), {"items": found}, warning)


def _pods(count: int) -> str:
    return f"{count} pod" if count == 1 else f"{count} pods"


def _records(text: str) -> list[dict[str, Any]]:
    """The JSON objects among ``text``'s lines (a span's line or a crash's traceback,
    not JSON or not a log record, is passed over)."""
    records = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "message" in record:
            records.append(record)
    return records
