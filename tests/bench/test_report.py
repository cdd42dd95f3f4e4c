"""The benchmark's report of repeated runs, with plain data: medians, spread, ratio."""

from __future__ import annotations

from bench import report


def test_repeated_runs_are_reported_as_medians_with_their_spread_and_ratio() -> None:
    key = "fleet.engine_cpu_seconds_per_instance"
    results = {
        "n": 100,
        "interval": "30s",
        "repeat": 3,
        "runs": {
            "temporal": [{key: 0.9}, {key: 0.3}, {key: 0.6}],
            "peer": [{key: 0.2}, {key: 0.4}, {key: 0.1}],
        },
    }
    table = report.markdown(results)
    assert "Medians of 3 interleaved runs per engine (min to max):" in table
    row = next(line for line in table.splitlines() if line.startswith("| Fleet: engine CPU"))
    assert row.endswith("| 0.6 (0.3 to 0.9) | 0.2 (0.1 to 0.4) | 3.00x |"), row


def test_one_run_has_no_medians_and_an_even_count_takes_the_middle_two() -> None:
    assert "Medians" not in report.markdown({"n": 1, "interval": "30s", "runs": {"peer": [{}]}})
    key = "fleet.engine_cpu_seconds_per_instance"
    two = {"n": 1, "interval": "30s", "repeat": 2, "runs": {"peer": [{key: 0.4}, {key: 0.1}]}}
    row = next(r for r in report.markdown(two).splitlines() if r.startswith("| Fleet: engine"))
    assert "| 0.25 (0.1 to 0.4) |" in row, row
