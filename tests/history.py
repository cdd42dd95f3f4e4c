"""Read a workflow history as text a search can find a secret in.

``WorkflowHistory.to_json()`` keeps every payload (inputs, results, signals, updates,
markers, failures' details) base64-encoded, so a plain substring search of it finds
nothing that went through a payload. ``readable`` decodes each one.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from temporalio.client import Client, WorkflowHistory


def _decoded(node: Any, out: list[str]) -> None:
    if isinstance(node, dict):
        if isinstance(node.get("data"), str) and "metadata" in node:
            try:
                out.append(base64.b64decode(node["data"]).decode("utf-8", "replace"))
            except (binascii.Error, ValueError):
                out.append(node["data"])
        for value in node.values():
            _decoded(value, out)
    elif isinstance(node, list):
        for value in node:
            _decoded(value, out)


def readable(history: WorkflowHistory) -> str:
    """Return the history's JSON followed by every payload it holds, decoded."""
    raw = history.to_json()
    decoded: list[str] = []
    _decoded(json.loads(raw), decoded)
    return "\n".join([raw, *decoded])


async def runs(client: Client, workflow_id: str) -> list[WorkflowHistory]:
    """Every run's history, the latest first: an instance's life spans runs (each
    continues as new at its history limit), followed back through each first event's
    ``continued_execution_run_id``."""
    found: list[WorkflowHistory] = []
    run_id: str | None = None  # the latest
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        found.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        if not started.continued_execution_run_id:
            return found
        run_id = started.continued_execution_run_id


async def every_run(client: Client, workflow_id: str) -> str:
    """``readable`` of every run of the workflow, the latest first: a scan of the latest
    alone would miss what the others hold."""
    return "\n".join(readable(history) for history in await runs(client, workflow_id))


def local_activities(history: WorkflowHistory) -> list[str]:
    """The activity each local activity's marker in ``history`` records, in order."""
    return [
        local_activity_type(e.marker_recorded_event_attributes)
        for e in history.events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_local_activity"
    ]


def local_activity_type(marker: Any) -> str:
    """The activity a local activity's marker records the result of."""
    data = json.loads(marker.details["data"].payloads[0].data)
    return str(data["activity_type"])
