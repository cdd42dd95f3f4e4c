"""Wait for something the system does on its own, by polling (never a fixed sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], *, timeout: float = 60, what: str = "it") -> Any:
    """Return the first truthy value of ``check()`` within ``timeout`` seconds, or fail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout}s")
