"""`dbi dev up` and `dbi dev down`: the README's run command, as a user runs it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from devstack import stack, tools

pytestmark = pytest.mark.stack

DBI = str(Path(sys.executable).parent / "dbi")


def _kubectl(kubeconfig: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.venv_tool("kubectl")), "--kubeconfig", kubeconfig, *args],
        capture_output=True,
        text=True,
        timeout=200,
        check=False,
    )


def _read_until(stream: Iterator[str], marker: str, *, timeout: float) -> list[str]:
    """Return the lines of ``stream`` up to the one containing ``marker``."""
    lines: list[str] = []

    def read() -> None:
        for line in stream:
            lines.append(line)
            if marker in line:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not any(marker in line for line in lines):
        raise AssertionError(f"no {marker!r} within {timeout}s; output: {''.join(lines)}")
    return lines


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """Give a test its own stack directory, and stop whatever it left running there."""
    yield tmp_path / "dev"
    stack.down(tmp_path / "dev")


def test_dev_up_runs_the_orchestrator_and_ctrl_c_stops_everything(state_dir: Path) -> None:
    """The run command prints working addresses, the sample becomes Ready, Ctrl-C stops all."""
    ui_port = tools.free_port()
    up = subprocess.Popen(
        [DBI, "dev", "up", "--state-dir", str(state_dir), "--ui-port", str(ui_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        output = "".join(_read_until(up.stdout, "Press Ctrl-C", timeout=180))
        info = stack.StackInfo.load(state_dir)
        assert info is not None
        assert f"kubeconfig      {info.kubeconfig}" in output
        assert f"Temporal UI     http://127.0.0.1:{ui_port}" in output
        assert _kubectl(info.kubeconfig, "get", "--raw", "/readyz").stdout == "ok"
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/", timeout=10) as ui:
            assert ui.status == 200
        # The run command created the sample; it becomes Ready with nothing else done.
        assert "Sample          DBInstance default/orders (created)" in output
        ready = _kubectl(
            info.kubeconfig, "wait", "--for=condition=Ready", "dbinstance/orders", "--timeout=120s"
        )
        assert ready.returncode == 0, ready.stderr
        # What it prints to try, as printed: the exports, then `dbi describe orders`.
        exports = dict(
            line.strip().removeprefix("export ").split("=", 1)
            for line in output.splitlines()
            if line.strip().startswith("export ")
        )
        assert {"KUBECONFIG", "TEMPORAL_ADDRESS"} <= exports.keys()
        outside = {k: v for k, v in os.environ.items() if k not in exports}

        def printed(*args: str) -> subprocess.CompletedProcess[str]:
            """Run `dbi ARGS` with the printed exports, as a newcomer does."""
            env = {**outside, **exports}
            return subprocess.run(
                [DBI, *args], env=env, capture_output=True, text=True, timeout=120, check=False
            )

        described = printed("describe", "orders")
        assert described.returncode == 0, described.stderr
        assert "Ready" in described.stdout
        # `dbi backup orders`, as printed: the stack's worker has a store and pg_basebackup.
        assert f"dbi backup orders       (into {state_dir}/backups)" in output
        backed_up = printed("backup", "orders")
        assert backed_up.returncode == 0, backed_up.stderr
        assert "Completed" in backed_up.stdout
        assert list((state_dir / "backups" / "default" / "orders").glob("*/dbi-backup.json"))
        # `dbi logs orders`, as printed: the processes' logs, read as their pods' logs.
        assert "dbi logs orders         (the worker's lines about it)" in output
        logged = printed("logs", "orders")
        assert logged.returncode == 0, logged.stderr
        assert "dbi-worker-dev" in logged.stdout and " acted (" in logged.stdout, logged.stdout
        assert {"worker", "watcher", "kubelet"} <= info.pids.keys()
        for process in ("worker", "watcher"):
            url = info.metrics[process]
            assert f"Metrics         {url} ({process})" in output
            with urllib.request.urlopen(url, timeout=10) as metrics:  # noqa: S310
                assert b"dbi_" in metrics.read()
        # The dev stack prints spans to the processes' logs, one JSON object per line.
        spans = [
            json.loads(line)
            for line in (state_dir / "worker.log").read_text().splitlines()
            if '"trace_id"' in line and '"context"' in line
        ]
        assert any(span["name"] == "RunStep:health" for span in spans)

        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 0
    finally:
        if up.poll() is None:
            up.kill()
    assert stack.wait_gone(list(info.pids.values()), timeout=10)
    assert stack.StackInfo.load(state_dir) is None


async def test_a_restarted_stack_keeps_its_objects_and_workflows(state_dir: Path) -> None:
    """After `dbi dev down` and `dbi dev up`, Kubernetes objects and running workflows remain."""
    run = [DBI, "dev", "up", "--state-dir", str(state_dir), "--ui-port", str(tools.free_port())]
    first = subprocess.run([*run, "--detach"], capture_output=True, text=True, check=False)
    assert first.returncode == 0, first.stderr
    info = stack.StackInfo.load(state_dir)
    assert info is not None
    created = _kubectl(info.kubeconfig, "create", "configmap", "kept", "--from-literal=a=1")
    assert created.returncode == 0, created.stderr
    client = await Client.connect(info.temporal_address)
    # No worker polls this queue, so the workflow stays running across the restart.
    workflow_id = f"kept-{uuid.uuid4()}"
    await client.start_workflow("Idle", id=workflow_id, task_queue=f"none-{uuid.uuid4()}")

    again = subprocess.run([*run, "--detach"], capture_output=True, text=True, check=False)
    assert again.returncode == 1 and "already runs" in again.stderr

    down = subprocess.run([DBI, "dev", "down", "--state-dir", str(state_dir)], check=False)
    assert down.returncode == 0
    assert stack.wait_gone(list(info.pids.values()), timeout=10)

    second = subprocess.run([*run, "--detach"], capture_output=True, text=True, check=False)
    assert second.returncode == 0, second.stderr
    assert "DBInstance default/orders (created)" in first.stdout
    assert "DBInstance default/orders (found, left as it is)" in second.stdout
    info = stack.StackInfo.load(state_dir)
    assert info is not None
    kept = _kubectl(info.kubeconfig, "get", "configmap", "kept", "-o", "json")
    assert json.loads(kept.stdout)["data"] == {"a": "1"}
    client = await Client.connect(info.temporal_address)
    described = await client.get_workflow_handle(workflow_id).describe()
    assert described.status == WorkflowExecutionStatus.RUNNING
