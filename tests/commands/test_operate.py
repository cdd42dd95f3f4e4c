"""The operator commands, run as a user runs them, against a real instance."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import tarfile
from pathlib import Path
from typing import IO, Any, cast

import pytest
import yaml
from kubernetes import client as k8s

from commands.report import LAST_APPLIED
from dbi import names
from devstack.stack import StackInfo
from tests import dbi_command
from tests.activities.lifecycle import ready
from tests.activities.logins import app_works, secret
from tests.orchestrator import IMAGES_NAMESPACE, Orchestrator
from tests.polling import until_awaited
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}


async def dbi(local_stack: StackInfo, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the ``dbi`` CLI (off the event loop: the worker it talks to runs on it)."""
    return await asyncio.to_thread(
        dbi_command.dbi, local_stack, *args, DBI_TEMPORAL_UI="http://ui.example:8233"
    )


async def test_status_describe_rotate_and_resize_on_a_ready_instance(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    local_stack: StackInfo,
    kube_api: Any,
    tmp_path: Path,
) -> None:
    """status and describe show the instance and its workflow; rotate and resize --force
    wait for the workflow's answer; each exits 0; report writes what a bug report needs."""
    orchestrator.apply(namespace, "db", SPEC)
    await asyncio.to_thread(orchestrator.wait_ready, namespace, "db")

    shown = await dbi(local_stack, "status", "-n", namespace)
    assert shown.returncode == 0, shown.stderr
    header, row = shown.stdout.splitlines()
    assert header.split()[:5] == ["NAMESPACE", "NAME", "PHASE", "READY", "STEP"]
    assert row.split()[:4] == [namespace, "db", "Running", "True"]

    described = await dbi(local_stack, "describe", "db", "-n", namespace)
    assert described.returncode == 0, described.stderr
    for condition in ("Ready", "CredentialsReady", "VMProvisioned", "DatabaseHealthy"):
        assert f"    {condition} " in described.stdout
    link = f"http://ui.example:8233/namespaces/default/workflows/dbinstance%2F{namespace}%2Fdb"
    assert link in described.stdout

    before = secret(kube_api, namespace, "db-credentials")["password"]
    rotated = await dbi(local_stack, "rotate", "db", "-n", namespace)
    assert rotated.returncode == 0, rotated.stderr
    assert "rotated: Secret db-credentials" in rotated.stdout
    after = secret(kube_api, namespace, "db-credentials")["password"]
    assert after != before and app_works(kube_api, namespace, after)
    assert before not in rotated.stdout + rotated.stderr and after not in rotated.stdout

    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    first_run = (await handle.describe()).run_id
    # Two forced passes, each an activity per step, take the run past its history limit:
    # it continues as new, and the report carries the run it continued from too.
    for _ in range(2):
        resized = await dbi(local_stack, "resize", "db", "-n", namespace, "--force")
        assert resized.returncode == 0, resized.stderr
        assert resized.stdout.startswith("resized: ")
    await until_awaited(
        lambda: _another_run(handle, first_run), what="the run continued as new", timeout=60
    )

    # `dbi report`: the instance, its children, Events, describe and the history, and no
    # Secret's data, even where `kubectl apply` left a copy of it in an annotation.
    leaky = json.dumps({"stringData": {"password": after}})
    k8s.CoreV1Api(kube_api).patch_namespaced_secret(
        "db-credentials", namespace, {"metadata": {"annotations": {LAST_APPLIED: leaky}}}
    )
    tarball = tmp_path / "report.tar.gz"
    files = await _report(local_stack, namespace, tarball)
    assert {
        "index.yaml",
        "dbinstance.yaml",
        "describe.txt",
        "events.yaml",
        "workflow-history.json",
        "children/Secret-db-credentials.yaml",
        "children/Service-db.yaml",
        "children/VirtualMachine-db.yaml",
        "children/PersistentVolumeClaim-db-data.yaml",
    } <= set(files), sorted(files)
    assert yaml.safe_load(files["index.yaml"])["notRead"] == {}
    assert b"VMProvisioned" in files["describe.txt"]
    history = json.loads(files["workflow-history.json"])["events"]
    previous = json.loads(files["workflow-history-previous.json"])["events"]
    assert history[0]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_STARTED"
    started = history[0]["workflowExecutionStartedEventAttributes"]
    assert previous[-1]["eventType"] == "EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW"
    assert started["continuedExecutionRunId"] != (await handle.describe()).run_id
    updates = [e for e in history + previous if "UPDATE_COMPLETED" in e["eventType"]]
    assert len(updates) == 3  # the rotation and both resizes
    secret_shown = yaml.safe_load(files["children/Secret-db-credentials.yaml"])
    assert secret_shown["metadata"]["name"] == "db-credentials" and "data" not in secret_shown
    everything = b"".join(files.values())
    for password in (before, after):
        for form in (password.encode(), base64.b64encode(password.encode())):
            assert form not in everything
    nowhere = tmp_path / "no-such-directory" / "report.tar.gz"
    unwritten = await dbi(local_stack, "report", "db", "-n", namespace, "-f", str(nowhere))
    assert (unwritten.returncode, unwritten.stderr.strip()) == (
        1,
        f"dbi: cannot write {nowhere}: No such file or directory",
    )
    again = await dbi(local_stack, "report", "db", "-n", namespace, "--file", str(tarball))
    assert (again.returncode, again.stderr.strip()) == (
        2,
        f"dbi: --file {tarball} exists; name another",
    )


async def _report(local_stack: StackInfo, namespace: str, tarball: Path) -> dict[str, bytes]:
    """`dbi report db` into ``tarball``: its files, by name within the folder."""
    reported = await dbi(local_stack, "report", "db", "-n", namespace, "--file", str(tarball))
    assert reported.returncode == 0, reported.stderr
    assert reported.stdout.startswith(f"wrote {tarball} ") and not reported.stderr
    with tarfile.open(tarball) as tar:
        return {
            m.name.split("/", 1)[1]: cast(IO[bytes], tar.extractfile(m)).read()
            for m in tar.getmembers()
        }


async def _another_run(handle: Any, first: str) -> bool:
    return bool((await handle.describe()).run_id != first)


async def test_retry_runs_a_stalled_instance_once_its_cause_is_fixed(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    local_stack: StackInfo,
    kube_api: Any,
) -> None:
    """An instance Stalled on an image that does not exist yet waits for a new
    generation; once the image exists, `dbi retry` runs a pass and it becomes Ready."""
    image = f"later-{namespace[-6:]}"
    orchestrator.apply(namespace, "db", {**SPEC, "image": f"{IMAGES_NAMESPACE}/{image}"})
    stalled = ("True", "ImageNotFound")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == stalled,
        what="Stalled ImageNotFound",
    )
    k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        "harvesterhci.io",
        "v1beta1",
        IMAGES_NAMESPACE,
        "virtualmachineimages",
        {
            "apiVersion": "harvesterhci.io/v1beta1",
            "kind": "VirtualMachineImage",
            "metadata": {"name": image},
            "spec": {"displayName": "created after the instance", "sourceType": "download"},
        },
    )
    await asyncio.sleep(2)
    assert orchestrator.condition(namespace, "db", "Stalled") == stalled  # nothing retries

    retried = await dbi(local_stack, "retry", "db", "-n", namespace)
    assert retried.returncode == 0, retried.stderr
    assert retried.stdout.startswith(f"retry: {namespace}/db runs a pass now")
    await ready(orchestrator, namespace)


async def test_a_missing_instance_exits_3_and_bad_usage_exits_2(
    local_stack: StackInfo, namespace: str, dbinstance_crd: str
) -> None:
    for command in (
        ["status", "nope"],
        ["describe", "nope"],
        ["rotate", "nope"],
        ["retry", "nope"],
    ):
        result = await dbi(local_stack, *command, "-n", namespace)
        assert result.returncode == 3, result.stderr
        assert f"no DBInstance {namespace}/nope" in result.stderr
    usage = await dbi(local_stack, "resize", "db", "-n", namespace)
    assert usage.returncode == 2 and "--force" in usage.stderr
