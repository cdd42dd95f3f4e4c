"""What the Temporal UI shows of a DBInstance workflow: a small table of its steps."""

from __future__ import annotations

from dbi.status import PassReport

_MARK = {"Satisfied": "✅", "Pending": "⏳", "Terminal": "⛔", "Transient": "⚠️"}


def steps_table(report: PassReport) -> str:
    """Return a markdown table of the last pass: each step, its outcome and reason."""
    ran = {r.step: r for r in report.results}
    rows = ["| step | condition | outcome | reason |", "|---|---|---|---|"]
    for step in report.pipeline:
        result = ran.get(step.name)
        if result is None:
            rows.append(f"| {step.name} | {step.condition_type} | not reached | |")
        else:
            mark = _MARK.get(result.outcome.value, "")
            rows.append(
                f"| {step.name} | {step.condition_type} | {mark} {result.outcome.value} "
                f"| {result.reason} |"
            )
    header = f"**generation {report.generation}**" + (" (deleting)" if report.deleting else "")
    return "\n".join([header, "", *rows])
