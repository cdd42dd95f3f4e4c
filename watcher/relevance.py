"""Which Kubernetes events are worth a pass: a classic controller's event predicates.

A pass re-checks every step, so the watcher wakes an instance only for a change that
may alter an outcome:

- **a DBInstance**: created, deleted, its spec changed (a new generation), its
  deletion begun, or one of its ``dbi.dev/`` annotations changed (a user's decision,
  such as ``dbi.dev/adopt``, which also ends a Terminal wait). Not a change of its
  status or other metadata alone: a pass that changes the status writes it, so waking
  on it would chain pass after pass (controller-runtime's GenerationChangedPredicate).
- **a child** (Secret, VM, VMI, PVC, Service): any change, unless the newest write to
  it was the orchestrator's own (its managedFields entry, manager ``dbi-orchestrator``,
  is the latest): the pass that wrote it goes on with what it wrote. A deletion always
  counts; so does any write by someone else (KubeVirt starting the VM, a hand edit),
  but one: a VM, VMI or claim still on its way (``Starting``, ``Scheduled``, a claim
  ``Pending``) with its spec unchanged. KubeVirt writes several such states in a row
  while a VM starts or stops, and Kubernetes writes a new claim two to four times
  before it is bound (the provisioner's and the scheduler's annotations,
  ``spec.volumeName`` and its binding annotations); no step's outcome changes until the
  transition ends (no step reads a claim's phase, and its capacity comes with the
  binding): the write that ends it (``Running``, ``Stopped``, ``Failed``, ``Bound``,
  ``Lost``, the VMI deleted) is the one that counts. But a claim becoming ``Bound``
  does not: the VM that uses the disk cannot start before it, so its ``Running``
  shows the binding (and wakes); a stopped instance's resize step, which waits for the
  data disk's capacity, looks again on its own short hint. A claim binds within
  seconds of its creation while its VM boots for up to a minute, so its wake was a
  pass that found the VM still starting.
- **a (re)list**: always, since events may have been missed before it.

Pure functions of the event and what the watcher saw before, tested with plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbi import names

Manifest = dict[str, Any]


DBI_PREFIX = f"{names.GROUP}/"


@dataclass(frozen=True)
class Seen:
    """What the watcher last saw of a DBInstance."""

    generation: int | None
    deleting: bool
    # Its dbi.dev/ annotations: the decisions users write there (dbi.dev/adopt).
    decisions: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, obj: Manifest) -> Seen:
        meta = obj.get("metadata", {})
        annotations = meta.get("annotations") or {}
        decisions = tuple(
            sorted((k, v) for k, v in annotations.items() if k.startswith(DBI_PREFIX))
        )
        return cls(meta.get("generation"), bool(meta.get("deletionTimestamp")), decisions)


def instance_event_matters(event: str, obj: Manifest, before: Seen | None) -> bool:
    """Whether an event of a DBInstance, last seen as ``before``, is worth a pass."""
    if event != "MODIFIED" or before is None:
        return True  # ADDED, DELETED, SYNC, or an instance this watcher has not seen
    now = Seen.of(obj)
    return (
        new_generation(now, before)
        or (now.deleting and not before.deleting)
        or decided(now, before)
    )


def new_generation(now: Seen, before: Seen | None) -> bool:
    """Whether the instance is new to this watcher or its spec changed since ``before``."""
    return before is None or now.generation != before.generation


def decided(now: Seen, before: Seen | None) -> bool:
    """Whether a user changed one of the instance's dbi.dev/ annotations since ``before``."""
    return before is not None and now.decisions != before.decisions


# KubeVirt's states of a VM (printableStatus) or VMI (phase), and a claim's (phase), on
# their way to another.
IN_TRANSITION = {
    "VirtualMachine": frozenset(
        {"Provisioning", "WaitingForVolumeBinding", "Starting", "Stopping", "Terminating"}
    ),
    "VirtualMachineInstance": frozenset({"", "Pending", "Scheduling", "Scheduled"}),
    "PersistentVolumeClaim": frozenset({"", "Pending"}),
}
STATE_FIELD = {
    "VirtualMachine": "printableStatus",
    "VirtualMachineInstance": "phase",
    "PersistentVolumeClaim": "phase",
}


def state_of(kind: str, obj: Manifest) -> str | None:
    """A VM's, VMI's or claim's state (None for other kinds)."""
    state = STATE_FIELD.get(kind)
    return None if state is None else str((obj.get("status") or {}).get(state, ""))


def in_transition(kind: str, obj: Manifest) -> bool:
    """Whether a VM, VMI or claim is in a state on its way to another (False for other
    kinds)."""
    return state_of(kind, obj) in IN_TRANSITION.get(kind, frozenset())


def claim_bound(kind: str, obj: Manifest, state_before: str | None) -> bool:
    """Whether a claim, last seen on its way (``state_before``), is now Bound."""
    return (
        kind == "PersistentVolumeClaim"
        and state_before in IN_TRANSITION[kind]
        and state_of(kind, obj) == "Bound"
    )


def child_event_matters(
    event: str,
    obj: Manifest,
    *,
    kind: str = "",
    before: int | None = None,
    state_before: str | None = None,
) -> bool:
    """Whether an event of a child object of ``kind`` is worth a pass to its instance;
    ``before`` is the child's generation when last seen (None: not seen), and
    ``state_before`` its state then (``state_of``; None: not seen, or another kind)."""
    if event == "DELETED":
        return True
    if written_last_by_orchestrator(obj):
        return False
    spec_unchanged = before is None or before == obj.get("metadata", {}).get("generation")
    quiet = in_transition(kind, obj) or claim_bound(kind, obj, state_before)
    return not (spec_unchanged and quiet)


@dataclass
class Children:
    """The generation and state each child was last seen at: ``child_event_matters``
    with memory.

    One map for every kind; each kind's watch thread touches only its own keys."""

    seen: dict[tuple[str, str, str], tuple[int | None, str | None]] = field(default_factory=dict)

    def event_matters(self, kind: str, event: str, obj: Manifest) -> bool:
        meta = obj.get("metadata", {})
        key = (kind, meta.get("namespace", ""), meta.get("name", ""))
        before, state_before = self.seen.get(key, (None, None))
        if event == "DELETED":
            self.seen.pop(key, None)
        else:
            self.seen[key] = (meta.get("generation"), state_of(kind, obj))
        return child_event_matters(event, obj, kind=kind, before=before, state_before=state_before)


def written_last_by_orchestrator(obj: Manifest) -> bool:
    """Whether every newest managedFields entry (timestamps are to the second) is ours."""
    entries = [e for e in obj.get("metadata", {}).get("managedFields") or [] if e.get("time")]
    if not entries:
        return False
    newest = max(e["time"] for e in entries)
    return all(e.get("manager") == names.FIELD_MANAGER for e in entries if e["time"] == newest)
