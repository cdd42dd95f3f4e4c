"""dbi's Prometheus metrics, and the collectors that read the watcher's state.

Names and labels follow Prometheus conventions (base units, ``_total`` counters) and
stay bounded: steps, outcomes, reasons and phases are finite sets from the code. Only
the watcher's per-instance families (Ready, and backups) are labeled with an
instance's namespace and name, one series each, as kube-state-metrics labels objects.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from pydantic import ValidationError

from dbi import names
from dbi.backup_spec import interval_seconds
from dbi.spec import DBInstanceSpec, PowerState

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
    """What an instance shows: its status's phase, whether it is Ready, and, when its
    spec schedules backups (not suspended), the time between two, and when it was
    created (both in seconds)."""

    phase: str
    ready: bool
    backup_interval: float | None = None
    created: float | None = None
    # While WAL is archived (spec.backup, powerState Running): status.archive's times.
    archived: float | None = None
    checked: float | None = None
    lag: float | None = None
    # While spec.backup.restoreTest is set, once a test ended (status.restoreTest): 1 it
    # restored, 0 it failed; and when it ended.
    restore_test: float | None = None
    restore_tested: float | None = None

    @classmethod
    def of(cls, status: Mapping[str, Any]) -> Shown:
        conditions = status.get("conditions") or []
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        return cls(status.get("phase") or "Unknown", ready)

    @classmethod
    def of_instance(cls, obj: Mapping[str, Any], now: datetime) -> Shown:
        shown = cls.of(obj.get("status") or {})
        try:
            spec = DBInstanceSpec.model_validate(obj.get("spec") or {})
        except ValidationError:  # a spec this watcher's models cannot read
            return shown
        scheduled = spec.backup
        if scheduled is None:
            return shown
        tested = (obj.get("status") or {}).get("restoreTest") or {}
        if scheduled.restore_test is not None and isinstance(tested.get("succeeded"), bool):
            shown = shown._replace(
                restore_test=float(tested["succeeded"]),
                restore_tested=_timestamp(tested.get("finishedAt")),
            )
        if spec.power_state is PowerState.RUNNING:
            archive = (obj.get("status") or {}).get("archive") or {}
            archived, checked = archive.get("lastArchivedAt"), archive.get("checkedAt")
            lag = archive.get("lagBytes")
            shown = shown._replace(
                archived=_timestamp(archived),
                checked=_timestamp(checked),
                lag=float(lag) if isinstance(lag, int) else None,
            )
        if scheduled.suspended:
            return shown
        interval = interval_seconds(scheduled.schedule, now)
        created = _timestamp((obj.get("metadata") or {}).get("creationTimestamp"))
        return shown._replace(backup_interval=interval, created=created)


def _timestamp(value: Any) -> float | None:
    """Seconds since the epoch of an RFC 3339 time as Kubernetes writes it."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC).timestamp()
    except ValueError:
        return None


@dataclass(frozen=True)
class BackupSeen:
    """One DBBackup as the watcher last saw it."""

    instance: str
    phase: str | None
    finished: float | None
    size: int | None


@dataclass(frozen=True)
class LastBackups:
    """An instance's newest completed backup (its time and size) and newest failed one."""

    completed: float | None = None
    size: int | None = None
    failed: float | None = None


@dataclass
class Backups:
    """The DBBackups the watcher sees (its DBBackup watch), by namespace and name."""

    seen: dict[tuple[str, str], BackupSeen] = field(default_factory=dict)

    def note(self, event: str, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        instance = (meta.get("labels") or {}).get(names.INSTANCE_LABEL)
        if event == "DELETED" or instance is None:
            self.seen.pop(key, None)
            return
        status = obj.get("status") or {}
        size = status.get("sizeBytes")
        self.seen[key] = BackupSeen(
            instance=str(instance),
            phase=status.get("phase"),
            finished=_timestamp(status.get("finishedAt")),
            size=int(size) if isinstance(size, int) else None,
        )

    def last(self) -> dict[tuple[str, str], LastBackups]:
        """Each instance's newest completed and failed backup, by (namespace, name)."""
        out: dict[tuple[str, str], LastBackups] = {}
        for (namespace, _), b in self.seen.items():
            if b.finished is None or b.phase not in ("Completed", "Failed"):
                continue
            key = (namespace, b.instance)
            now = out.get(key, LastBackups())
            if b.phase == "Completed" and (now.completed or 0) < b.finished:
                now = LastBackups(completed=b.finished, size=b.size, failed=now.failed)
            elif b.phase == "Failed" and (now.failed or 0) < b.finished:
                now = LastBackups(completed=now.completed, size=now.size, failed=b.finished)
            out[key] = now
        return out


class WatcherCollector(Collector):
    """Export the watcher's counters, the instances it sees by phase, and each
    instance's Ready: the one family labeled with instances, one series each, as
    kube-state-metrics labels objects."""

    def __init__(
        self,
        counters: Callable[[], object],
        statuses: Callable[[], Mapping[tuple[str, str], Shown]],
        backups: Callable[[], Backups] = Backups,
    ) -> None:
        self._counters = counters
        self._statuses = statuses
        self._backups = backups

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
        yield from _backup_families(statuses, self._backups().last())


def _backup_families(
    statuses: Mapping[tuple[str, str], Shown], last: Mapping[tuple[str, str], LastBackups]
) -> Iterable[Metric]:
    """The per-instance backup families: each instance's that the watcher sees."""
    labels = ["namespace", "name"]
    families = {
        "interval": GaugeMetricFamily(
            "dbi_backup_interval_seconds",
            "Seconds between two scheduled backups of the DBInstance (spec.backup.schedule, "
            "not suspended).",
            labels=labels,
        ),
        "created": GaugeMetricFamily(
            "dbi_backup_scheduled_instance_created_timestamp_seconds",
            "When a DBInstance with a backup schedule was created.",
            labels=labels,
        ),
        "completed": GaugeMetricFamily(
            "dbi_backup_last_completed_timestamp_seconds",
            "When the DBInstance's newest completed backup finished.",
            labels=labels,
        ),
        "size": GaugeMetricFamily(
            "dbi_backup_last_completed_size_bytes",
            "Bytes in the store of the DBInstance's newest completed backup.",
            labels=labels,
        ),
        "failed": GaugeMetricFamily(
            "dbi_backup_last_failed_timestamp_seconds",
            "When the DBInstance's newest failed backup failed.",
            labels=labels,
        ),
        "archived": GaugeMetricFamily(
            "dbi_wal_last_archived_timestamp_seconds",
            "When the WAL archiver last stored a WAL segment of the running DBInstance "
            "(status.archive.lastArchivedAt).",
            labels=labels,
        ),
        "checked": GaugeMetricFamily(
            "dbi_wal_archive_checked_timestamp_seconds",
            "When the WAL archiver last emptied the running DBInstance's spool "
            "(status.archive.checkedAt; at most 10 minutes old while archiving works).",
            labels=labels,
        ),
        "lag": GaugeMetricFamily(
            "dbi_wal_archive_lag_bytes",
            "Bytes of WAL the running DBInstance had written past the newest segment "
            "stored, when the archiver last checked (status.archive.lagBytes; under 16 MiB "
            "while archiving keeps up).",
            labels=labels,
        ),
        "restore_test": GaugeMetricFamily(
            "dbi_restore_test_succeeded",
            "1 when the DBInstance's last restore test (spec.backup.restoreTest) restored "
            "its newest backup and the WAL archived since, 0 when it failed "
            "(status.restoreTest).",
            labels=labels,
        ),
        "restore_tested": GaugeMetricFamily(
            "dbi_restore_test_last_timestamp_seconds",
            "When the DBInstance's last restore test ended.",
            labels=labels,
        ),
    }
    for key, shown in sorted(statuses.items()):
        if shown.backup_interval is not None:
            families["interval"].add_metric(list(key), shown.backup_interval)
        if shown.backup_interval is not None and shown.created is not None:
            families["created"].add_metric(list(key), shown.created)
        shown_values = (
            ("archived", shown.archived),
            ("checked", shown.checked),
            ("lag", shown.lag),
            ("restore_test", shown.restore_test),
            ("restore_tested", shown.restore_tested),
        )
        for name, value in shown_values:
            if value is not None:
                families[name].add_metric(list(key), value)
        found = last.get(key)
        if found is None:
            continue
        for name, value in (("completed", found.completed), ("failed", found.failed)):
            if value is not None:
                families[name].add_metric(list(key), value)
        if found.size is not None:
            families["size"].add_metric(list(key), float(found.size))
    yield from families.values()
