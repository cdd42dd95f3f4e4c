"""The dbi CLI as kubectl users expect it: the cluster and namespace chosen as kubectl
chooses them, -o json|yaml, --timeout, --version, `kubectl dbi`, and the Kubernetes side
shown when Temporal does not answer. Real API server and Temporal; instances without a
worker (what the commands show does not need one)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from temporalio.client import Client

from dbi import connect, names
from dbi.messages import Wake
from devstack import tools
from devstack.stack import StackInfo
from tests import dbi_command
from watcher.wakeups import Wakeups

pytestmark = pytest.mark.stack

SPEC = {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}}
VERSION = connect.VERSION


def dbi(local_stack: StackInfo, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return dbi_command.dbi(local_stack, *args, **env)


@pytest.fixture
def instance(kube_api: Any, namespace: str, dbinstance_crd: str) -> str:
    """A DBInstance ``db`` in the test's namespace (no worker acts on it)."""
    k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
        names.GROUP,
        names.VERSION,
        namespace,
        names.PLURAL,
        {
            "apiVersion": f"{names.GROUP}/{names.VERSION}",
            "kind": "DBInstance",
            "metadata": {"name": "db"},
            "spec": SPEC,
        },
    )
    return "db"


def kubeconfig_with_namespaces(local_stack: StackInfo, path: Path, namespace: str) -> Path:
    """The admin's kubeconfig, its current context set to ``namespace``, and a second
    context ``elsewhere`` on the same cluster with no namespace."""
    config = yaml.safe_load(Path(local_stack.kubeconfig).read_text())
    current = next(c for c in config["contexts"] if c["name"] == config["current-context"])
    current["context"]["namespace"] = namespace
    elsewhere = {**current["context"]}
    elsewhere.pop("namespace")
    config["contexts"].append({"name": "elsewhere", "context": elsewhere})
    path.touch(mode=0o600)
    path.write_text(yaml.safe_dump(config))
    return path


def rows(stdout: str) -> list[list[str]]:
    return [line.split() for line in stdout.splitlines()[1:]]


def test_version_and_the_kubectl_plugin(local_stack: StackInfo) -> None:
    """`dbi --version` names the version and the commit; kubectl finds `kubectl-dbi` on PATH, so
    `kubectl dbi ...` is the same command, naming itself so."""
    shown = dbi(local_stack, "--version")
    assert shown.returncode == 0 and shown.stdout.startswith(f"dbi {VERSION} (commit "), shown
    bin_dir = str(tools.venv_tool("dbi").parent)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    kubectl = str(tools.venv_tool("kubectl"))

    def plugin(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "dbi", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    version = plugin("--version")
    assert version.returncode == 0 and version.stdout == shown.stdout, version
    usage = plugin("status", "--help")
    assert usage.returncode == 0 and usage.stdout.startswith("usage: kubectl dbi status"), usage


def test_the_namespace_and_cluster_come_as_kubectl_takes_them(
    local_stack: StackInfo, namespace: str, instance: str, tmp_path: Path
) -> None:
    """No -n: the context's namespace; --kubeconfig over KUBECONFIG; --context picks
    another context (and its namespace); an unknown context is bad usage, named."""
    config = kubeconfig_with_namespaces(local_stack, tmp_path / "kubeconfig", namespace)
    by_env = dbi(local_stack, "status", KUBECONFIG=str(config))
    assert by_env.returncode == 0, by_env.stderr
    assert rows(by_env.stdout)[0][:2] == [namespace, instance]
    by_flag = dbi(local_stack, "status", "--kubeconfig", str(config))  # KUBECONFIG: admin's
    assert by_flag.returncode == 0 and rows(by_flag.stdout)[0][:2] == [namespace, instance]
    elsewhere = dbi(local_stack, "status", "--context", "elsewhere", KUBECONFIG=str(config))
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert [namespace, instance] not in [r[:2] for r in rows(elsewhere.stdout)]
    before = dbi(
        local_stack, "--context", "elsewhere", "-n", namespace, "status", KUBECONFIG=str(config)
    )
    assert before.returncode == 0 and rows(before.stdout)[0][:2] == [namespace, instance]
    described = dbi(local_stack, "describe", instance, KUBECONFIG=str(config))
    assert described.returncode == 0 and f"DBInstance {namespace}/db" in described.stdout
    unknown = dbi(local_stack, "status", "--context", "nope", KUBECONFIG=str(config))
    assert unknown.returncode == 2 and "context 'nope'" in unknown.stderr, unknown


def test_status_and_describe_print_json_and_yaml(
    local_stack: StackInfo, namespace: str, instance: str
) -> None:
    status = dbi(local_stack, "status", "-n", namespace, "-o", "json")
    assert status.returncode == 0, status.stderr
    (item,) = json.loads(status.stdout)["items"]
    assert (item["namespace"], item["name"], item["ready"]) == (namespace, instance, "Unknown")
    assert item["workflow"]["id"] == names.workflow_id(namespace, instance)
    assert item["workflow"]["running"] is False
    assert item["step"] is None
    described = dbi(local_stack, "describe", instance, "-n", namespace, "-o", "yaml")
    assert described.returncode == 0, described.stderr
    data = yaml.safe_load(described.stdout)
    assert (data["namespace"], data["name"], data["generation"]) == (namespace, instance, 1)
    assert data["temporalUI"].endswith(f"dbinstance%2F{namespace}%2Fdb")
    bad = dbi(local_stack, "status", "-n", namespace, "-o", "wide")
    assert bad.returncode == 2 and "invalid choice: 'wide'" in bad.stderr


def test_status_and_describe_show_kubernetes_when_temporal_does_not_answer(
    local_stack: StackInfo, namespace: str, instance: str, tmp_path: Path
) -> None:
    """Temporal down: what Kubernetes holds is printed (or reported), the workflow's side
    is unknown, stderr says why, and the exit code is 1."""
    down = f"127.0.0.1:{tools.free_port()}"
    status = dbi(local_stack, "status", "-n", namespace, TEMPORAL_ADDRESS=down)
    assert status.returncode == 1, status
    assert rows(status.stdout)[0][:4] == [namespace, instance, "-", "Unknown"]
    assert "unknown (Temporal did not answer)" in status.stdout
    said = f"Temporal at {down} (TEMPORAL_ADDRESS or the Temporal profile) did not answer"
    assert said in status.stderr
    described = dbi(local_stack, "describe", instance, "-n", namespace, TEMPORAL_ADDRESS=down)
    assert described.returncode == 1, described
    assert f"DBInstance {namespace}/db" in described.stdout
    assert "unknown (Temporal did not answer)" in described.stdout
    as_json = dbi(local_stack, "status", "-n", namespace, "-o", "json", TEMPORAL_ADDRESS=down)
    assert json.loads(as_json.stdout)["items"][0]["workflow"]["running"] is None
    # A report is written all the same, without the history, and says so.
    tarball = tmp_path / "report.tar.gz"
    reported = dbi(
        local_stack, "report", instance, "-n", namespace, "-f", str(tarball), TEMPORAL_ADDRESS=down
    )
    assert reported.returncode == 1 and reported.stdout.startswith(f"wrote {tarball} ")
    assert reported.stderr.startswith(f"dbi: not in the report: workflow history ({said}")
    with tarfile.open(tarball) as tar:
        listed = {m.name.split("/", 1)[1] for m in tar.getmembers()}
    assert "dbinstance.yaml" in listed and "workflow-history.json" not in listed


@pytest.fixture
async def workerless(temporal_client: Client, namespace: str, instance: str) -> AsyncIterator[str]:
    """The instance's workflow, started on a task queue no worker polls."""
    queue = f"nobody-{secrets.token_hex(3)}"
    await Wakeups(temporal_client, task_queue=queue).signal(namespace, instance, Wake(reason="t"))
    yield instance
    await temporal_client.get_workflow_handle(names.workflow_id(namespace, instance)).terminate()


async def test_rotate_and_resize_stop_waiting_at_their_timeout(
    local_stack: StackInfo, namespace: str, workerless: str
) -> None:
    """No worker answers: rotate and resize --force say what they wait for and what the
    workflow does, give up at --timeout with exit 5 and say the workflow goes on; status
    says the workflow did not answer; a bad duration is bad usage."""
    # The first progress line comes when the query gives up (QUERY_SECONDS, 5 s); the
    # timeout leaves a loaded machine ample room past that.
    rotate = await _dbi(local_stack, "rotate", workerless, "-n", namespace, "--timeout", "20s")
    assert rotate.returncode == 5, rotate
    said = rotate.stderr.splitlines()
    # It says what it waits for at once, then what the workflow does every 5 s.
    assert said[0] == f"rotate_credentials: {namespace}/{workerless}, waiting for its workflow"
    assert "s no answer to the progress query" in said[1], said
    assert "did not finish within 20s; the workflow goes on with it" in rotate.stderr
    resize = await _dbi(
        local_stack, "resize", workerless, "-n", namespace, "--force", "--timeout", "1s"
    )
    assert resize.returncode == 5, resize
    status = await _dbi(local_stack, "status", "-n", namespace)
    assert status.returncode == 0, status
    assert "unknown (no answer to the progress query" in status.stdout
    bad = await _dbi(local_stack, "rotate", workerless, "-n", namespace, "--timeout", "soon")
    assert bad.returncode == 2 and "'soon' is not a duration" in bad.stderr


async def test_ctrl_c_ends_a_wait_in_one_line(
    local_stack: StackInfo, namespace: str, workerless: str
) -> None:
    """Ctrl-C while `dbi rotate` waits: exit 130 and one line, no traceback."""
    waiting = subprocess.Popen(
        [str(tools.venv_tool("dbi")), "rotate", workerless, "-n", namespace],
        env={
            **os.environ,
            "KUBECONFIG": local_stack.kubeconfig,
            "TEMPORAL_ADDRESS": local_stack.temporal_address,
        },
        stderr=subprocess.PIPE,
        text=True,
        # As at a terminal: a run started in the background of a shell without job
        # control (CI, say) inherits SIGINT ignored, and so would its `dbi`.
        preexec_fn=_interruptible,  # noqa: PLW1509 (it only resets one signal)
    )
    assert waiting.stderr is not None
    first = await asyncio.to_thread(waiting.stderr.readline)  # it waits now
    assert first.startswith("rotate_credentials:"), first
    waiting.send_signal(signal.SIGINT)
    _, rest = await asyncio.to_thread(waiting.communicate, timeout=30)
    assert waiting.returncode == 130
    assert rest.strip().splitlines()[-1] == (
        "dbi: interrupted; what was asked of a workflow goes on"
    )
    assert "Traceback" not in rest


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


async def _dbi(local_stack: StackInfo, *args: str) -> subprocess.CompletedProcess[str]:
    """``dbi`` off the event loop (the session's Temporal client lives on it)."""
    return await asyncio.to_thread(dbi, local_stack, *args)


def test_dbi_bench_passes_its_options_to_the_benchmark() -> None:
    """`dbi bench --n 10 ...`, as docs/benchmarks.md says, reaches the benchmark whole."""
    result = subprocess.run(
        [str(tools.venv_tool("dbi")), "bench", "--n", "10", "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "--engines" in result.stdout


def test_a_reader_that_goes_away_ends_the_command_quietly(
    local_stack: StackInfo, namespace: str, instance: str
) -> None:
    """`dbi status NAME | head`: the reader is gone before dbi writes; dbi ends as a tool
    SIGPIPE kills (141), with no traceback on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        ran = subprocess.run(
            [str(tools.venv_tool("dbi")), "status", instance, "-n", namespace],
            env={
                **os.environ,
                "KUBECONFIG": local_stack.kubeconfig,
                "TEMPORAL_ADDRESS": local_stack.temporal_address,
            },
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert (ran.returncode, ran.stderr) == (141, "")


def test_a_cluster_dbi_cannot_reach_is_said_in_a_sentence(
    local_stack: StackInfo, namespace: str, instance: str, tmp_path: Path
) -> None:
    """A kubeconfig that does not exist is named (bad usage, 2); a server that does not
    answer is said so with where dbi looked (1), with no traceback or dump; NAME with -A
    is bad usage, as in kubectl."""
    missing = tmp_path / "nope"
    gone = dbi(local_stack, "status", KUBECONFIG=str(missing))
    assert (gone.returncode, gone.stderr.strip()) == (
        2,
        f"dbi: kubeconfig {missing} does not exist",
    )
    config = yaml.safe_load(Path(local_stack.kubeconfig).read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable = tmp_path / "unreachable"
    unreachable.touch(mode=0o600)
    unreachable.write_text(yaml.safe_dump(config))
    down = dbi(local_stack, "status", "-n", namespace, KUBECONFIG=str(unreachable))
    assert down.returncode == 1
    assert down.stderr.startswith(f"dbi: the cluster of {unreachable} did not answer"), down
    assert "Traceback" not in down.stderr and len(down.stderr.splitlines()) == 1
    both = dbi(local_stack, "status", instance, "-A")
    assert both.returncode == 2 and "NAME and -A do not go together" in both.stderr


def test_logs_say_where_they_looked_and_which_pod_they_could_not_read(
    local_stack: StackInfo, namespace: str, kube_api: Any
) -> None:
    """No dbi pods in --dbi-namespace: one line naming it (1). A pod whose log the API
    server cannot get (its node is gone) is named on stderr, the rest printed (1)."""
    nowhere = dbi(local_stack, "logs", "db", "-n", namespace, "--dbi-namespace", "nowhere")
    assert (nowhere.returncode, nowhere.stderr.strip()) == (
        1,
        "dbi: no dbi-worker or dbi-watcher pods in namespace nowhere (where dbi is "
        "installed: --dbi-namespace)",
    )
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="default"))
    )
    pod = k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="dbi-worker-x", labels={"app.kubernetes.io/name": "dbi-worker"}
        ),
        spec=k8s.V1PodSpec(
            node_name="gone", containers=[k8s.V1Container(name="worker", image="dbi")]
        ),
    )
    core.create_namespaced_pod(namespace, pod)
    try:
        partial = dbi(local_stack, "logs", "db", "-n", namespace, "--dbi-namespace", namespace)
    finally:  # at once: no kubelet confirms a graceful deletion
        core.delete_namespaced_pod("dbi-worker-x", namespace, grace_period_seconds=0)
    assert partial.returncode == 1, partial
    assert partial.stdout.strip() == f"no lines about {namespace}/db in the logs of 1 pod"
    assert partial.stderr.startswith("dbi: not read: dbi-worker-x: "), partial.stderr
    assert len(partial.stderr.splitlines()) == 1 and "Traceback" not in partial.stderr


def test_each_mistake_is_one_line_and_its_documented_exit_code(
    local_stack: StackInfo, namespace: str, instance: str, tmp_path: Path
) -> None:
    """The tried mistakes of docs/operations.md, with `dbi describe`: one line on stderr
    that names what to fix, no traceback, and the exit code the page gives."""
    missing = tmp_path / "nope"
    config = local_stack.kubeconfig
    down = f"127.0.0.1:{tools.free_port()}"
    tried = [
        # (what, args, env, exit code, how the line starts)
        (
            "no kubeconfig",
            [instance],
            {"KUBECONFIG": str(missing)},
            2,
            f"dbi: kubeconfig {missing}",
        ),
        (
            "wrong context",
            [instance, "--context", "prod"],
            {},
            2,
            f"dbi: kubeconfig {config}: it has no context 'prod'",
        ),
        (
            "wrong context, -n",
            [instance, "--context", "prod", "-n", namespace],
            {},
            2,
            f"dbi: kubeconfig {config}: ",
        ),
        (
            "unknown instance",
            ["ghost", "-n", namespace],
            {},
            3,
            f"dbi: no DBInstance {namespace}/ghost",
        ),
        (
            "wrong namespace",
            [instance, "-n", "default"],
            {},
            3,
            f"dbi: no DBInstance default/{instance}",
        ),
        (
            "Temporal down",
            [instance, "-n", namespace],
            {"TEMPORAL_ADDRESS": down},
            1,
            f"dbi: Temporal at {down}",
        ),
    ]
    for what, args, env, code, line in tried:
        ran = dbi(local_stack, "describe", *args, **env)
        assert ran.returncode == code, (what, ran)
        (said,) = ran.stderr.splitlines()
        assert said.startswith(line), (what, said)


def test_the_command_line_needs_no_worker_extra(
    local_stack: StackInfo, namespace: str, instance: str, tmp_path: Path
) -> None:
    """As `pipx install dbi` installs it (tests/commands/without_worker.py refuses every
    module outside dbi's own requirements' closure: psycopg, cryptography, minio,
    OpenTelemetry, ...), the operator commands work against the real stack, and the
    worker says which extra it needs."""
    script = Path(__file__).parent / "without_worker.py"

    def alone(*args: str) -> subprocess.CompletedProcess[str]:
        return dbi_command.dbi(local_stack, *args, program=[sys.executable, str(script)])

    refused = set(alone("--blocked").stdout.split())
    assert {"psycopg", "cryptography", "minio", "opentelemetry", "prometheus_client"} <= refused
    for args in (
        ["--version"],
        ["status", "-n", namespace],
        ["describe", instance, "-n", namespace],
        ["backups", "-n", namespace],
    ):
        ran = alone(*args)
        assert ran.returncode == 0, (args, ran.stderr)
    # The image commands too (an empty cache: nothing built there, whatever this machine
    # has built elsewhere).
    url = "https://files.example/x.qcow2"
    manifest = alone(
        "image", "manifest", "--version", "18.6", "--url", url, "--cache", str(tmp_path)
    )
    assert (manifest.returncode, manifest.stderr.strip()) == (
        1,
        "dbi: no image of PostgreSQL 18.6.0 is built from this recipe; run `dbi image build "
        "--version 18.6` first",
    )
    worker = alone("worker")
    assert worker.returncode == 2
    assert "dbi: the worker needs dbi's worker extra (pip install 'dbi[worker]')" in worker.stderr


def test_the_temporal_a_command_talks_to_is_chosen_in_order_and_shown(
    local_stack: StackInfo, namespace: str, instance: str, kube_api: Any, tmp_path: Path
) -> None:
    """--temporal-address, else TEMPORAL_ADDRESS (or a profile), else the ConfigMap the
    install labels in --dbi-namespace, else 127.0.0.1:7233; `describe` says which."""
    live = local_stack.temporal_address
    dead = f"127.0.0.1:{tools.free_port()}"
    home = f"home-{secrets.token_hex(3)}"
    core = k8s.CoreV1Api(kube_api)
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=home)))
    core.create_namespaced_config_map(
        home,
        k8s.V1ConfigMap(
            metadata=k8s.V1ObjectMeta(
                name="dbi-temporal-abc", labels={"dbi.dev/temporal-settings": "true"}
            ),
            data={"TEMPORAL_ADDRESS": live, "TEMPORAL_NAMESPACE": "default"},
        ),
    )
    nothing = {  # no TEMPORAL_* variable, no profile file
        **{k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")},
        "KUBECONFIG": local_stack.kubeconfig,
        "TEMPORAL_CONFIG_FILE": str(tmp_path / "none.toml"),
    }

    def describe(*flags: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(tools.venv_tool("dbi")), "describe", instance, "-n", namespace, *flags],
            env={**nothing, **env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    try:
        flagged = describe("--temporal-address", live, TEMPORAL_ADDRESS=dead)
        assert flagged.returncode == 0, flagged.stderr
        assert f"Temporal     {live} namespace default (from --temporal-address)" in flagged.stdout
        from_env = describe(TEMPORAL_ADDRESS=live)
        assert from_env.returncode == 0, from_env.stderr
        assert "(from TEMPORAL_ADDRESS or the Temporal profile)" in from_env.stdout
        recorded = describe("--dbi-namespace", home)
        assert recorded.returncode == 0, recorded.stderr
        assert f"{live} namespace default (from ConfigMap {home}/dbi-temporal-abc)" in (
            recorded.stdout
        )
        unrecorded = describe("--dbi-namespace", f"{home}-none", "-o", "json")
        chosen = json.loads(unrecorded.stdout)["temporal"]
        assert chosen["address"] == "127.0.0.1:7233"
        assert chosen["source"] == f"the default; no record in {home}-none"
    finally:
        core.delete_namespace(home)
