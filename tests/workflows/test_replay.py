"""Histories recorded by the workflow tests replay against the current workflow code.

A change to DBInstanceWorkflow or DBBackupWorkflow that would break the workflows
already running fails here. Re-record after an intended, guarded change:
DBI_RECORD_HISTORIES=1 ./dev test tests/workflows (new histories are added; keep the old
ones, they are the point).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.workflows import conftest
from workflows.backup import DBBackupWorkflow
from workflows.dbinstance import DBInstanceWorkflow
from workflows.upgrade import DBUpgradeWorkflow
from workflows.worker import workflow_runner

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_a_re_recording_never_replaces_a_recorded_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording a test's history again picks a new file; the recorded one stays."""
    monkeypatch.setattr(conftest, "HISTORIES", tmp_path)
    first = conftest.history_path("a-test")
    first.write_text("recorded")
    second = conftest.history_path("a-test")
    second.write_text("re-recorded")
    assert (first.name, second.name) == ("a-test.json", "a-test-2.json")
    assert first.read_text() == "recorded"
    assert conftest.history_path("a-test").name == "a-test-3.json"


def test_histories_are_kept() -> None:
    """The replay test has recorded histories to replay."""
    assert len(HISTORIES) >= 10


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_a_recorded_history_replays_on_the_current_code(path: Path) -> None:
    """Replaying a recorded history issues the same commands as when it was recorded."""
    history = WorkflowHistory.from_json(f"dbinstance/{path.stem}", path.read_text())
    replayer = Replayer(
        workflows=[DBInstanceWorkflow, DBBackupWorkflow, DBUpgradeWorkflow],
        data_converter=pydantic_data_converter,
        interceptors=[TracingInterceptor()],  # as the worker runs it
        workflow_runner=workflow_runner(sandboxed=True),  # checked as the tests run it
    )
    await replayer.replay_workflow(history)
