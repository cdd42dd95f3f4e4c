"""``python -m bench.replay_cost``: what replaying a run costs by its length (the
figures are in docs/benchmarks.md; here, that the command runs, replays each cut
and reads its options)."""

from __future__ import annotations

import re

import pytest

from bench import replay_cost


def test_it_replays_each_cut_and_gives_the_cost_per_event(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert replay_cost.main(["--passes", "5", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    cuts = [int(n) for n in re.findall(r"^  (\d+) events: [\d.]+ ms a replay$", out, re.M)]
    assert len(cuts) == 3 and cuts == sorted(cuts)  # after 1, 2 and 5 passes
    assert re.search(r"^[\d.]+ ms of CPU per event replayed", out, re.M)


@pytest.mark.parametrize(
    ("argv", "named"), [(["--passes", "1"], "--passes"), (["--repeat", "0"], "--repeat")]
)
def test_bad_options_are_named(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        replay_cost.main(argv)
    assert named in capsys.readouterr().err
