"""Heartbeat while one long call runs: an upload, a statement such as ANALYZE.

An activity with a heartbeat timeout must heartbeat while it waits on a call that may
outlast it, or Temporal takes it for lost and runs it again elsewhere while the first
still works. ``working`` runs the call in a thread of its own and heartbeats meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")
EVERY_SECONDS = 2.0


def working(what: str, work: Callable[[], T]) -> T:
    """Do ``work`` in a thread, heartbeating ``what`` every ``EVERY_SECONDS`` until it
    is done; return what it returned, raise what it raised."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="heartbeating") as pool:
        done = pool.submit(work)
        while True:
            activity.heartbeat(what)
            try:
                return done.result(timeout=EVERY_SECONDS)
            except FuturesTimeout:
                continue
