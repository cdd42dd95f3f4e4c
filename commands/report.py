"""`dbi report NAME`: one tarball a user attaches to a bug report. It holds the
DBInstance, its children (each kind dbi labels with ``dbi.dev/instance``) and DBBackups,
the Events about any of them, what ``dbi describe`` says and the workflow's history.

No Secret's data goes in: Secrets are read as metadata alone (the API server never
sends their data), and the annotation ``kubectl apply`` keeps a copy of an object in
(``last-applied-configuration``, which holds a Secret's data in full) is dropped from
every object. What could not be read (a kind this cluster does not serve, a list RBAC
forbids, Temporal down) is named in the tarball's ``index.yaml`` and on stderr, and the
command exits 1 having written the rest."""

from __future__ import annotations

import io
import json
import tarfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client as k8s
from temporalio.service import RPCError

from commands import cluster, operate, target
from commands.cluster import Kube, read_instance
from commands.operate import FAILED, NOT_FOUND, OK, USAGE, Answer
from dbi import kinds, names, version

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# The children's kinds, in the order the report lists them, and DBBackups.
CHILDREN = tuple(k for k in kinds.KINDS if k.labelled and k.namespaced)
BACKUPS = kinds.Kind(names.BACKUP_KIND, f"apis/{names.GROUP}/{names.VERSION}/{names.BACKUP_PLURAL}")


def add_parser(commands: Any, cluster_options: Callable[..., None], operate_: Any) -> None:
    parser = commands.add_parser(
        "report",
        help="write a tarball about an instance to attach to a bug report",
        description="Write NAME's DBInstance, its children, DBBackups and Events, what "
        "`dbi describe` says and its workflow's history into a .tar.gz to attach to a bug "
        "report. It holds no Secret's data: Secrets are read as metadata alone.",
    )
    cluster.instance_argument(parser, "the DBInstance")
    parser.add_argument(
        "-f",
        "--file",
        type=Path,
        help="where to write it (default: dbi-report-NAMESPACE-NAME-TIME.tar.gz here)",
    )
    cluster_options(parser)
    parser.set_defaults(run=operate_(lambda a: report(a.kube, a.namespace, a.name, file=a.file)))


async def report(kube: Kube, namespace: str, name: str, *, file: Path | None = None) -> Answer:
    """Gather what is known of ``namespace/name`` and write it as a .tar.gz."""
    instance = read_instance(kube, namespace, name)
    if instance is None:
        return Answer(NOT_FOUND, f"dbi: no DBInstance {namespace}/{name}")
    if file is not None and file.exists():
        return Answer(USAGE, f"dbi: --file {file} exists; name another")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    folder = f"dbi-report-{namespace}-{name}-{stamp}"
    missing: dict[str, str] = {}
    files: dict[str, str] = {"dbinstance.yaml": _yaml(_clean(instance))}
    api = kube.api()
    involved = {(names.KIND, name)}
    for kind in (*CHILDREN, BACKUPS):
        try:
            found = _children(api, kind, namespace, name)
        except k8s.ApiException as e:
            missing[kind.name] = _why(e)
            continue
        for obj in found:
            involved.add((kind.name, obj["metadata"]["name"]))
            files[f"children/{kind.name}-{obj['metadata']['name']}.yaml"] = _yaml(obj)
    try:
        files["events.yaml"] = _yaml(_events(api, namespace, involved))
    except k8s.ApiException as e:
        missing["Event"] = _why(e)
    described = await operate.describe(kube, namespace, name)
    files["describe.txt"] = described.text + "\n"
    histories, unread = await _histories(kube, namespace, name)
    if unread is not None:
        missing["workflow history"] = unread
    files.update(histories)
    index = {
        "instance": f"{namespace}/{name}",
        "written": stamp,
        "dbi": version.describe(),
        "files": sorted(files),
        "notRead": missing,
    }
    files["index.yaml"] = _yaml(index)
    path = file or Path(f"{folder}.tar.gz")
    try:
        _write(path, folder, files)
    except OSError as e:
        return Answer(FAILED, f"dbi: cannot write {path}: {e.strerror or e}")
    size = path.stat().st_size
    text = f"wrote {path} ({len(files)} files, {size / 1024:.1f} KiB; no Secret's data)"
    warning = (
        "dbi: not in the report: " + "; ".join(f"{k} ({v})" for k, v in missing.items())
        if missing
        else None
    )
    return Answer(FAILED if missing else OK, text, index, warning)


def _children(api: k8s.ApiClient, kind: kinds.Kind, namespace: str, name: str) -> list[Any]:
    """``kind``'s objects labelled as ``name``'s, cleaned; Secrets as metadata alone."""
    source = kinds.source(api, kind, namespace, metadata=kind.metadata)
    listed = source.list_fn(*source.args, label_selector=f"{names.INSTANCE_LABEL}={name}")
    if not isinstance(listed, dict):  # the core API's models
        listed = api.sanitize_for_serialization(listed)
    items = sorted(cast(list[dict[str, Any]], listed["items"]), key=lambda i: i["metadata"]["name"])
    return [_clean({"kind": kind.name, **item}) for item in items]


def _events(api: k8s.ApiClient, namespace: str, involved: set[tuple[str, str]]) -> list[Any]:
    """The namespace's Events about the instance or one of its children, oldest first."""
    listed = api.sanitize_for_serialization(k8s.CoreV1Api(api).list_namespaced_event(namespace))
    about = [
        e
        for e in listed["items"]
        if (e["involvedObject"].get("kind"), e["involvedObject"].get("name")) in involved
    ]
    about.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
    return [_clean(e) for e in about]


async def _histories(kube: Kube, namespace: str, name: str) -> tuple[dict[str, str], str | None]:
    """The workflow's history as the Temporal CLI writes it (JSON), and the run's it
    continued from, if any (``workflow-history-previous.json``: what led to the
    continue-as-new, such as the updates served just before); else why not."""
    client, _ = await operate.client_or_why(kube)
    if client is None:
        chosen = target.resolve(kube)
        return {}, f"Temporal at {chosen.address} ({chosen.source}) did not answer"
    workflow_id = names.workflow_id(namespace, name)
    found: dict[str, str] = {}
    try:
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        found["workflow-history.json"] = json.dumps(json.loads(history.to_json()), indent=1)
        started = history.events[0].workflow_execution_started_event_attributes
        if started.continued_execution_run_id:
            handle = client.get_workflow_handle(
                workflow_id, run_id=started.continued_execution_run_id
            )
            previous = await handle.fetch_history()
            found["workflow-history-previous.json"] = json.dumps(
                json.loads(previous.to_json()), indent=1
            )
    except RPCError as e:
        return found, e.message
    return found, None


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without its managed fields and without kubectl's last-applied copy."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    return {**obj, "metadata": meta}


def _why(error: k8s.ApiException) -> str:
    if error.status == 404:
        return "this cluster does not serve it"
    if error.status == 403:
        return "forbidden to you"
    return f"{error.status} {error.reason}"


def _yaml(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False)


def _write(path: Path, folder: str, files: dict[str, str]) -> None:
    """Write ``files`` under ``folder/`` in a gzipped tarball at ``path`` (mode 0600:
    it may name what a cluster's other users should not read)."""
    path.touch(mode=0o600, exist_ok=False)
    try:
        with tarfile.open(path, "w:gz") as tar:
            for member, text in sorted(files.items()):
                data = text.encode()
                info = tarfile.TarInfo(f"{folder}/{member}")
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
                tar.addfile(info, io.BytesIO(data))
    except BaseException:
        path.unlink(missing_ok=True)  # no half-written report left behind
        raise
