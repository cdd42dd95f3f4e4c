"""A long call in an activity is heartbeated while it runs (plain threads, the SDK's
activity environment)."""

from __future__ import annotations

import time

import pytest
from temporalio.testing import ActivityEnvironment

from activities.infra import heartbeats


def test_a_long_call_is_heartbeated_until_it_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-second call with a heartbeat every tenth: several heartbeats, its value."""
    monkeypatch.setattr(heartbeats, "EVERY_SECONDS", 0.1)
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)

    def slow() -> str:
        time.sleep(1.0)
        return "analyzed"

    assert env.run(heartbeats.working, "ANALYZE app", slow) == "analyzed"
    assert len(beats) >= 5 and beats[0] == ("ANALYZE app",)


def test_what_the_call_raised_is_raised() -> None:
    def broken() -> None:
        raise ValueError("cut")

    with pytest.raises(ValueError, match="cut"):
        ActivityEnvironment().run(heartbeats.working, "x", broken)
