"""Which Kubernetes events are worth a pass: a classic controller's event predicates.

A pass re-checks every step, so the watcher wakes an instance only for a change that
may alter an outcome:

- **a DBInstance**: created, deleted, its spec changed (a new generation) or its
  deletion begun. Not a change of its status or metadata alone: every pass writes the
  status, so waking on it would chain pass after pass (controller-runtime's
  GenerationChangedPredicate).
- **a child** (Secret, VM, VMI, PVC, Service): any change, unless the newest write to
  it was the orchestrator's own (its managedFields entry, manager ``dbi-orchestrator``,
  is the latest): the pass that wrote it goes on with what it wrote. A deletion always
  counts; so does any write by someone else (KubeVirt starting the VM, a hand edit).
- **a (re)list**: always, since events may have been missed before it.

Pure functions of the event and what the watcher saw before, tested with plain data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dbi import names

Manifest = dict[str, Any]


@dataclass(frozen=True)
class Seen:
    """What the watcher last saw of a DBInstance."""

    generation: int | None
    deleting: bool

    @classmethod
    def of(cls, obj: Manifest) -> Seen:
        meta = obj.get("metadata", {})
        return cls(meta.get("generation"), bool(meta.get("deletionTimestamp")))


def instance_event_matters(event: str, obj: Manifest, before: Seen | None) -> bool:
    """Whether an event of a DBInstance, last seen as ``before``, is worth a pass."""
    if event != "MODIFIED" or before is None:
        return True  # ADDED, DELETED, SYNC, or an instance this watcher has not seen
    now = Seen.of(obj)
    return now.generation != before.generation or (now.deleting and not before.deleting)


def child_event_matters(event: str, obj: Manifest) -> bool:
    """Whether an event of a child object is worth a pass to its instance."""
    return event == "DELETED" or not written_last_by_orchestrator(obj)


def written_last_by_orchestrator(obj: Manifest) -> bool:
    """Whether every newest managedFields entry (timestamps are to the second) is ours."""
    entries = [e for e in obj.get("metadata", {}).get("managedFields") or [] if e.get("time")]
    if not entries:
        return False
    newest = max(e["time"] for e in entries)
    return all(e.get("manager") == names.FIELD_MANAGER for e in entries if e["time"] == newest)
