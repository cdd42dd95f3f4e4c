"""Render the reference table of steps, conditions and reasons from the code.

``docs/steps.md`` holds its output between markers; a test fails when they differ.
Regenerate with ``python -m activities.worker.reference``.
"""

from __future__ import annotations

import sys
from enum import StrEnum
from types import ModuleType

from activities.infra import ownership
from activities.steps import loop
from activities.worker import registry
from dbi import markdown, pipeline, steps
from dbi import status as summary

START, END = "<!-- reference:start -->", "<!-- reference:end -->"

_MODULES: dict[str, ModuleType] = {m.STEP.spec.name: m for m in registry.MODULES}


def _reasons(reasons: type[StrEnum]) -> str:
    return ", ".join(f"`{r.value}`" for r in reasons)


def table() -> str:
    """Return the markdown table: every step, its condition, and the reasons it uses."""
    rows = ["| step | condition | reasons |", "|---|---|---|"]
    for spec in (*pipeline.REPLICATED, *pipeline.TEARDOWN):
        rows.append(
            f"| {spec.name} | `{spec.condition_type}` | {_reasons(_MODULES[spec.name].Reason)} |"
        )
    summarized = "`Ready`, `Reconciling`, `Stalled`"
    rows.append(
        f"| (summary) | {summarized} | {_reasons(summary.Reason)}, or the blocking step's |"
    )
    failed = (
        f"`{steps.STEP_FAILED}` (an activity kept raising), `{loop.INSTANCE_GONE}`, "
        f"`{loop.NAMESPACE_TERMINATING}` (may not create in a namespace being deleted), "
        f"`{loop.SPEC_UNREADABLE}` (Terminal: this worker's models cannot read the stored "
        "spec, a CRD newer or older than the worker; the message names the fields), "
        f"`{steps.PAUSED}` (`dbi.dev/paused` holds an action), and the API server's "
        f"refusals: `{loop.INVALID}` (422, Terminal), `{loop.FORBIDDEN}` (403: RBAC, a quota, "
        f"an admission policy; Transient), `{loop.THROTTLED}` (429, Transient, waits at "
        f"least its Retry-After), `{loop.CONFLICT}` (a 409 through every fresh read, "
        f"Transient), `{loop.UNAVAILABLE}` (a 5xx with Retry-After, Transient, waits it); "
        f"`{loop.LOCKED}` (Pending: a database session holds a lock the step "
        "needs, past lock_timeout)"
    )
    rows.append(f"| (any step) | its own | {failed} |")
    watchful = ", ".join(m.STEP.spec.name for m in registry.MODULES if m.STEP.children)
    rows.append(
        f"| ({watchful}) | its own | "
        f"{_reasons(ownership.Reason)} (an object with a child's name that is not the "
        "instance's: [ownership](#ownership-and-deletion)) |"
    )
    return "\n".join(rows) + "\n"


def replace_in(text: str) -> str:
    """Return ``text`` with the table between the markers replaced by the current one."""
    return markdown.replace_between(text, START, END, table())


if __name__ == "__main__":
    sys.stdout.write(table())
