"""``python -m bench.run_memory``: a cached workflow's memory as its run grows (the
figures are in docs/benchmarks.md; here, that the command runs and reads its options)."""

from __future__ import annotations

import pytest

from bench import run_memory


def test_it_reads_the_memory_every_five_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_memory.main(["--n", "2", "--passes", "5", "--limits", "60"]) == 0
    out = capsys.readouterr().out
    assert "limit 60: 5 passes, " in out
    assert "KiB per workflow after 5 passes" in out


@pytest.mark.parametrize(
    ("argv", "named"),
    [(["--limits", "ten"], "--limits"), (["--limits", "10"], "each limit"), (["--n", "0"], "--n")],
)
def test_bad_options_are_named(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run_memory.main(argv)
    assert named in capsys.readouterr().err
