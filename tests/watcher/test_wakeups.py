"""The watcher's wakes against the real Temporal dev server: a burst of instances (a
relist, a fleet applied at once) is signaled a few at a time, and every instance gets
its workflow started with its wake."""

from __future__ import annotations

import asyncio
import secrets

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from dbi import names
from dbi.messages import Wake
from tests.polling import until
from watcher.wakeups import Wakeups

pytestmark = pytest.mark.stack

BURST = 40
IN_FLIGHT = 4


async def test_a_burst_of_wakes_goes_out_a_few_at_a_time_and_none_is_lost(
    temporal_client: Client, namespace: str
) -> None:
    queue = f"nobody-{secrets.token_hex(3)}"  # no worker: the workflows only start
    wakeups = Wakeups(temporal_client, task_queue=queue, in_flight=IN_FLIGHT)
    sending = most = 0
    send = wakeups.signal

    async def counted(namespace: str, name: str, wake: Wake) -> None:
        nonlocal sending, most
        sending += 1
        most = max(most, sending)
        try:
            await send(namespace, name, wake)
        finally:
            sending -= 1

    wakeups.signal = counted  # type: ignore[method-assign]
    instances = [f"db{i}" for i in range(BURST)]
    for name in instances:
        wakeups.note(namespace, name, "ADDED", 1)
    handles = [
        temporal_client.get_workflow_handle(names.workflow_id(namespace, n)) for n in instances
    ]
    try:
        await until(lambda: wakeups.counters.signals_sent == BURST, what="every wake sent")
        assert most == IN_FLIGHT  # never more at once, and the burst did not go one by one
        described = await asyncio.gather(*(h.describe() for h in handles))
        assert {d.status for d in described} == {WorkflowExecutionStatus.RUNNING}
        assert wakeups.counters.send_failures == 0
    finally:
        await asyncio.gather(*(h.terminate() for h in handles), return_exceptions=True)
