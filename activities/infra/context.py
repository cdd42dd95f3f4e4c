"""What every activity is given (``Context``): the Kubernetes access, the configuration,
the pass's read of its instance, and the worker's Temporal Schedules."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from activities.infra.kube import Instance, Kube
from activities.infra.schedules import Schedules
from dbi.config import Config
from dbi.passes import LoadedPassInput
from dbi.steps import StepInput


class PassReads:
    """The instance each recent pass's load read, by pass id, in this process.

    A pass reads its DBInstance once, at its start (``load_instance``); its steps start
    from that read instead of each reading the instance again, as a controller's
    reconcile reads its object once and hands it to each step. A step that acts reads
    afresh and records what it read, so the steps after it see the change. Only the
    ``size`` most recent passes are kept; a pass not found (another worker ran its load,
    or the worker restarted since) makes the step read the instance itself. A step that
    raises forgets its pass's read: its retry, and the steps after it, read afresh (the
    read may be why it raised: a conflict, an instance deleted since).
    """

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._reads: OrderedDict[str, Instance] = OrderedDict()
        self._lock = threading.Lock()

    def remember(self, pass_id: str, instance: Instance) -> None:
        if not pass_id:
            return
        with self._lock:
            self._reads[pass_id] = instance
            self._reads.move_to_end(pass_id)
            while len(self._reads) > self._size:
                self._reads.popitem(last=False)

    def forget(self, pass_id: str) -> None:
        with self._lock:
            self._reads.pop(pass_id, None)

    def recall(self, step_input: StepInput) -> Instance | None:
        """The instance the step's pass read, if this process has it and it is the one
        the step is for (same UID)."""
        if not step_input.pass_id:
            return None
        with self._lock:
            found = self._reads.get(step_input.pass_id)
        return found if found is not None and found.uid == step_input.uid else None


class Settles(Protocol):
    """Where a settled pass goes: the worker's re-checks (``activities.worker.rechecks``)."""

    def settle(
        self,
        workflow_id: str,
        loaded: LoadedPassInput,
        check: Callable[[LoadedPassInput], str | None],
        net: float,
        every: float | None = None,
    ) -> bool: ...

    def forget(self, workflow_id: str) -> None: ...


@dataclass(frozen=True)
class Context:
    """What every step is given: the Kubernetes access, the configuration, the pass reads,
    and the worker's Temporal Schedules."""

    kube: Kube
    config: Config
    passes: PassReads = field(default_factory=PassReads)
    # The worker's Temporal Schedules (the backup step's); None: a worker without them.
    schedules: Schedules | None = None
    # The settled instances the worker re-checks between passes; None: it re-checks none.
    rechecks: Settles | None = None


class Activity:
    """Base of the activities that are not steps (load, status, rotations): the Context."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
