"""dbi's Prometheus metrics, and the collectors that read the watcher's state.

Names and labels follow Prometheus conventions (base units, ``_total`` counters) and
stay bounded: steps, outcomes, reasons and phases are finite sets from the code; no
series is labeled with an instance's name.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PASSES = Counter(
    "dbi_passes",
    "Convergence passes whose status was written, by outcome: converged, or the outcome "
    "of the step that stopped the pass (pending, transient, terminal).",
    ["outcome"],
)
STEP_OUTCOMES = Counter(
    "dbi_step_outcomes",
    "Step activity results by step, outcome and reason; outcome 'error' is an attempt "
    "that raised (reason: the exception's type).",
    ["step", "outcome", "reason"],
)
STEP_SECONDS = Histogram(
    "dbi_step_duration_seconds",
    "Time one step activity attempt took.",
    ["step"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
RECHECKS = Counter(
    "dbi_rechecks",
    "The worker's re-checks of settled instances between their workflows' passes, by "
    "result: quiet (found what the last pass found) or changed (the workflow was woken).",
    ["result"],
)
GENERATION_READY_SECONDS = Histogram(
    "dbi_generation_ready_seconds",
    "From the first pass that saw a new generation of a DBInstance to the status showing "
    "it converged (convergedGeneration equal to it).",
    buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
)


class Shown(NamedTuple):
    """What an instance's status shows: its phase, and whether it is Ready."""

    phase: str
    ready: bool

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Shown:
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return cls(status.get("phase") or "Unknown", ready)


class WatcherCollector(Collector):
    """Export the watcher's counters, the instances it sees by phase, and each
    instance's Ready: the one family labeled with instances, one series each, as
    kube-state-metrics labels objects."""

    def __init__(
        self,
        counters: Callable[[], object],
        statuses: Callable[[], Mapping[tuple[str, str], Shown]],
    ) -> None:
        self._counters = counters
        self._statuses = statuses

    def collect(self) -> Iterable[Metric]:
        c = self._counters()
        for name, attribute, help in (
            ("dbi_watcher_events", "events_seen", "Kubernetes events the watcher acted on."),
            (
                "dbi_watcher_ignored_events",
                "events_ignored",
                "Events not worth a pass: a status-only change, the orchestrator's own write.",
            ),
            ("dbi_watcher_signals", "signals_sent", "Wake signals (signal-with-start) sent."),
            (
                "dbi_watcher_coalesced",
                "coalesced",
                "Events folded into a pending wake instead of a signal of their own.",
            ),
            ("dbi_watcher_signal_failures", "send_failures", "Wake signals that failed."),
        ):
            family = CounterMetricFamily(name, help)
            family.add_metric([], float(getattr(c, attribute)))
            yield family
        by_phase = GaugeMetricFamily(
            "dbi_instances", "DBInstances the watcher sees, by status phase.", labels=["phase"]
        )
        statuses = dict(self._statuses())
        for phase, count in sorted(Tally(s.phase for s in statuses.values()).items()):
            by_phase.add_metric([phase], count)
        yield by_phase
        ready = GaugeMetricFamily(
            "dbi_instance_ready",
            "1 when the DBInstance's Ready condition is True, else 0 (served by the watcher "
            "that leads; a standby serves none).",
            labels=["namespace", "name"],
        )
        for (namespace, name), shown in sorted(statuses.items()):
            ready.add_metric([namespace, name], float(shown.ready))
        yield ready
