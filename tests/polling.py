"""Wait for something the system does on its own, by polling (never a fixed sleep)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any


def eventually(check: Callable[[], Any], *, timeout: float = 60, what: str = "it") -> Any:
    """Return the first truthy value of ``check()`` within ``timeout`` seconds, or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout}s")


async def until(
    check: Callable[[], Any], *, timeout: float = 60, what: str = "it", every: float = 0.3
) -> Any:
    """``eventually`` for async tests: ``check`` runs in a thread, so the event loop (an
    in-process worker's, a watcher's) goes on meanwhile."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := await asyncio.to_thread(check):
            return value
        await asyncio.sleep(every)
    raise AssertionError(f"{what} did not happen within {timeout}s")


async def until_awaited(
    check: Callable[[], Awaitable[Any]], *, timeout: float = 30, what: str = "it"
) -> Any:
    """``until`` for a check that is itself a coroutine (it awaits the client it asks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := await check():
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout}s")
