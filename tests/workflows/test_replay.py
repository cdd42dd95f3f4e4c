"""Histories recorded by the workflow tests replay against the current workflow code.

A change to DBInstanceWorkflow, DBBackupWorkflow or DBDatabaseWorkflow (DBRoleWorkflow
is the same code) that would break the workflows already running fails here.
Re-record after an intended change guarded by a patch (docs/engine.md, "Changing
workflow code"): DBI_RECORD_HISTORIES=1 ./dev test tests/workflows (new histories are
added; keep the old ones, they are the point).
Most come from the workflow tests on Temporal's time-skipping server with stub
activities. ``real-stack-*`` come from the dev server and the real steps: a run of
test_replay_under_queries.py whose workflow tasks queries cut short while local
activities ran, and the orchestrator's stack tests (``tests/orchestrator.py``
records them with DBI_RECORD_HISTORIES=1): Pending and Terminal steps, an activity
that failed, updates, deletion and teardown, continue-as-new.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import WorkflowHistory

from dbi.payloads import DATA_CONVERTER
from tests.workflows import definitions, recorded

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_a_re_recording_never_replaces_a_recorded_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording a test's history again picks a new file; the recorded one stays."""
    monkeypatch.setattr(recorded, "HISTORIES", tmp_path)
    first = recorded.history_path("a-test")
    first.write_text("recorded")
    second = recorded.history_path("a-test")
    second.write_text("re-recorded")
    assert (first.name, second.name) == ("a-test.json", "a-test-2.json")
    assert first.read_text() == "recorded"
    assert recorded.history_path("a-test").name == "a-test-3.json"


def test_histories_are_kept() -> None:
    """The replay test has recorded histories to replay."""
    assert len(HISTORIES) >= 10


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_a_recorded_history_replays_on_the_current_code(path: Path) -> None:
    """Replaying a recorded history issues the same commands as when it was recorded."""
    history = WorkflowHistory.from_json(f"dbinstance/{path.stem}", path.read_text())
    replayer = definitions.replayer(sandboxed=True)  # checked as the tests run it
    await replayer.replay_workflow(history)


def _recorded_results() -> list[tuple[str, str, Payload]]:
    """(history, activity, result payload) of every activity each history recorded."""
    found = []
    for path in HISTORIES:
        history = WorkflowHistory.from_json("replay", path.read_text())
        scheduled = {}
        for event in history.events:
            if event.HasField("activity_task_scheduled_event_attributes"):
                began = event.activity_task_scheduled_event_attributes
                scheduled[event.event_id] = began.activity_type.name
            elif event.HasField("activity_task_completed_event_attributes"):
                ended = event.activity_task_completed_event_attributes
                if ended.result.payloads:
                    name = scheduled[ended.scheduled_event_id]
                    found.append((path.stem, name, ended.result.payloads[0]))
            elif event.HasField("marker_recorded_event_attributes"):
                details = event.marker_recorded_event_attributes.details
                if "result" in details and details["result"].payloads:
                    data = json.loads(details["data"].payloads[0].data)
                    found.append((path.stem, data["activity_type"], details["result"].payloads[0]))
    return found


def test_every_recorded_result_reads_back_the_same_in_no_more_bytes() -> None:
    """dbi's payloads leave out the fields that hold their default: each activity result
    the histories recorded decodes, re-encodes no larger and decodes again to the same
    value; a settled pass's result carries no empty field."""
    returns: dict[str | None, Any] = {d.name: d.ret_type for d in definitions.activities()}
    converter = DATA_CONVERTER.payload_converter
    results = _recorded_results()
    assert {"load_and_run_pass", "run_pass", "load_instance"} <= {n for _, n, _ in results}
    for history, name, payload in results:
        value: Any = converter.from_payload(payload, returns[name])
        again = converter.to_payload(value)
        assert converter.from_payload(again, returns[name]) == value, (history, name)
        assert len(again.data) <= len(payload.data), (history, name)
    settled = next(p for _, n, p in results if n == "load_and_run_pass")
    smaller = converter.to_payload(converter.from_payload(settled, returns["load_and_run_pass"]))
    assert b"null" not in smaller.data
