"""What the Temporal UI and its clients see of a DBInstance workflow: a small table of
its steps (current details), its search attributes, the answer to the progress query.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from dbi import names
    from dbi.messages import Progress, StepProgress
    from dbi.status import PassReport, Summary, summarize
    from workflows.state import State

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


def identify(namespace: str, name: str) -> None:
    """Set DbiNamespace and DbiName if the starter did not."""
    current = workflow.info().typed_search_attributes
    if current.get(names.NAME_ATTRIBUTE) is None:
        workflow.upsert_search_attributes(
            [
                names.NAMESPACE_ATTRIBUTE.value_set(namespace),
                names.NAME_ATTRIBUTE.value_set(name),
            ]
        )


def publish(report: PassReport, *, before: Summary | None) -> Summary:
    """Show the pass in the Temporal UI and the search attributes (upserted when the
    summary changed since ``before``); return the pass's summary."""
    summary = summarize(report)
    workflow.set_current_details(steps_table(report))
    if summary != before:
        workflow.upsert_search_attributes(
            [
                names.PHASE_ATTRIBUTE.value_set(summary.phase.value),
                names.READY_ATTRIBUTE.value_set(summary.ready),
                names.STEP_ATTRIBUTE.value_set(summary.step or "-"),
            ]
        )
    return summary


def progress(state: State) -> Progress:
    """The answer of the progress query."""
    last = state.last_report
    return Progress(
        namespace=state.namespace,
        name=state.name,
        passes=state.carried.passes,
        generation=last.generation if last else None,
        summary=state.carried.summary,
        last_pass=[
            StepProgress(step=r.step, outcome=r.outcome, reason=r.reason, message=r.message)
            for r in (last.results if last else [])
        ],
        waiting_for=state.waiting_for or "a pass is running",
        next_wakeup=state.next_wakeup,
        queued_requests=state.requests.count(),
    )
