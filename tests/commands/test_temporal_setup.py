"""`dbi temporal setup`, and the worker and watcher refusing a Temporal without it.

Against a fresh Temporal dev server started without dbi's search attributes, as a
platform team's own Temporal is on day one.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbi import names
from devstack import tools
from devstack.stack import StackInfo
from devstack.temporal import TemporalDevServer
from tests.dbi_command import dbi

pytestmark = pytest.mark.stack

ATTRIBUTES = list(names.SEARCH_ATTRIBUTES)


@pytest.fixture
def bare_temporal(tmp_path: Path) -> Iterator[str]:
    """A Temporal dev server with none of dbi's search attributes; its address."""
    server = TemporalDevServer(
        data_dir=tmp_path,
        port=tools.free_port(),
        ui_port=None,
        die_with_parent=True,
        search_attributes=False,
    )
    server.start()
    try:
        yield server.address
    finally:
        server.stop()


def test_setup_registers_the_attributes_once_and_the_processes_start_after(
    local_stack: StackInfo, bare_temporal: str, tmp_path: Path
) -> None:
    env = {"TEMPORAL_ADDRESS": bare_temporal, "DBI_TASK_QUEUE": "dbi-setup-test"}
    for process in ("worker", "watcher"):
        refused = dbi(local_stack, process, **env)
        assert refused.returncode == 2, refused.stderr
        assert f"dbi: the {process} cannot start:" in refused.stderr
        assert "lacks dbi's search attributes DbiNamespace (Keyword)" in refused.stderr
        assert "run `dbi temporal setup`" in refused.stderr

    first = dbi(local_stack, "temporal", "setup", **env)
    assert first.returncode == 0, first.stderr
    for key in ATTRIBUTES:
        assert f"search attribute {key} (" in first.stdout and "): adding" in first.stdout
    assert f"added {len(ATTRIBUTES)} search attribute(s)" in first.stdout
    assert "no worker polls it yet" in first.stdout

    again = dbi(local_stack, "temporal", "setup", **env)
    assert again.returncode == 0, again.stderr
    assert again.stdout.count("already registered") == len(ATTRIBUTES)
    assert "added" not in again.stdout
    # The flag wins over the environment, as for the operator commands.
    nowhere = {**env, "TEMPORAL_ADDRESS": f"127.0.0.1:{tools.free_port()}"}
    flagged = dbi(local_stack, "--temporal-address", bare_temporal, "temporal", "setup", **nowhere)
    assert flagged.returncode == 0, flagged.stderr
    assert flagged.stdout.count("already registered") == len(ATTRIBUTES)

    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [str(tools.venv_tool("dbi")), "worker"],
            env={**os.environ, "KUBECONFIG": local_stack.kubeconfig, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            polled = dbi(local_stack, "temporal", "setup", **env)
            if "1 worker(s) polling" in polled.stdout:
                break
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, polled.stdout
            time.sleep(1)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
