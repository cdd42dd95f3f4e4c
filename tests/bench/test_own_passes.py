"""``bench --own-passes`` paces the settled instances' own passes as the steady state
holds them: N per RECHECK_NET, the instance passed longest ago first."""

from __future__ import annotations

import time

import pytest

from bench import own_passes
from dbi import names


def test_the_rate_is_the_fleet_over_six_hours() -> None:
    assert own_passes.rate(10_000) * 60 == 10_000 / 360  # 27.8 a minute
    assert own_passes.rate(0) == 0


def test_a_window_holds_as_many_passes_as_the_rate_says() -> None:
    per_second = 0.5
    assert own_passes.due(100.0, per_second, 100.0) == 0
    assert own_passes.due(100.0, per_second, 100.9) == 0  # the first is in mid-slice
    assert own_passes.due(100.0, per_second, 101.0) == 1
    assert own_passes.due(100.0, per_second, 100.0 + 330) == 165
    assert own_passes.due(100.0, 0.0, 1e9) == 0
    # 100 instances at a six-hourly net: not one in a minute's window
    assert own_passes.due(0.0, own_passes.rate(100), 60.0) == 0


def test_the_instances_passed_longest_ago_come_first_the_patched_last() -> None:
    ready = {("a", 1): 30.0, ("b", 1): 10.0, ("c", 1): 20.0, ("d", 1): 5.0}
    order = own_passes.oldest_first("bench", ["a", "b", "c", "d"], ready, reaction=1)
    assert order == [names.workflow_id("bench", n) for n in ("d", "b", "c", "a")]


class _Recorded(own_passes.OwnPasses):
    def __init__(self, ids: list[str], per_second: float, fail: set[str]) -> None:
        super().__init__("unused:0", ids, per_second)
        self.signalled: list[tuple[str, float]] = []
        self.fail = fail
        self.began = 0.0

    async def _connect(self) -> None:
        self.began = time.monotonic()

    async def _signal(self, workflow_id: str) -> None:
        if workflow_id in self.fail:
            raise RuntimeError("workflow not found")
        self.signalled.append((workflow_id, time.monotonic()))


def test_it_asks_in_order_never_ahead_of_its_pace_and_counts_what_failed() -> None:
    per_second = 20.0
    with _Recorded(["w1", "w2", "w3"], per_second, fail={"w2"}) as asked:
        deadline = time.monotonic() + 30
        while len(asked.signalled) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert [w for w, _ in asked.signalled[:4]] == ["w1", "w3", "w1", "w3"]
    assert asked.failed >= 2 and asked.asked == len(asked.signalled)
    # the k-th ask (1, 2, ...; failed ones count) never before the middle of its slice
    for k, (_, at) in enumerate(asked.signalled[:4]):
        nth = [1, 3, 4, 6][k]  # w1, (w2 failed), w3, w1, (w2 failed), w3
        assert at - asked.began >= (nth - 0.5) / per_second - 0.01
    assert not asked._thread.is_alive()  # stopped with the block


def test_nothing_is_asked_without_a_rate() -> None:
    with _Recorded(["w1"], per_second=0.0, fail=set()) as asked:
        time.sleep(0.2)
    assert asked.signalled == [] and not asked._thread.is_alive()


class _Unreachable(_Recorded):
    async def _connect(self) -> None:
        raise ConnectionError("no Temporal at unused:0")


def test_a_window_that_could_not_ask_says_so() -> None:
    with (
        pytest.raises(RuntimeError, match="own passes: stopped asking: no Temporal"),
        _Unreachable(["w1"], per_second=1.0, fail=set()),
    ):
        time.sleep(0.2)
