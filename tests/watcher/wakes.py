"""The wakes a workflow's history received."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.history import runs


async def wakes(client: Client, workflow_id: str) -> list[tuple[datetime, str]]:
    """Return the wake signals in a workflow's history: (time, reason)."""
    return [(when, wake.get("reason", "")) for when, wake in await _wakes(client, workflow_id)]


async def _wakes(client: Client, workflow_id: str) -> list[tuple[datetime, dict[str, Any]]]:
    """The wake signals of every run, oldest first: a run continues as new every 15 or so
    passes, and a wake read from the latest run alone goes missing when it does."""
    found = []
    for history in reversed(await runs(client, workflow_id)):
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                attrs = event.workflow_execution_signaled_event_attributes
                payloads = attrs.input.payloads
                payload = json.loads(payloads[0].data) if payloads else {}
                found.append((event.event_time.ToDatetime(), payload))
    return found
