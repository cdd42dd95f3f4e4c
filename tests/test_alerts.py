"""deploy/monitoring/prometheusrule.yaml's backup alerts, evaluated by promtool (Prometheus'
own rule engine) against series as the worker serves them: an archiver that stops, an
instance never archived, a backup schedule that stops, a backup that fails, a restore
test that fails. Each alert
fires when it should, names the instance and links its runbook, and clears when the
cause does."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from activities.operations.walarchive import CHECKED_EVERY
from devstack import promtool

pytestmark = pytest.mark.stack  # it builds promtool (Go), as the chart's tests build helm

RULES = Path(__file__).resolve().parents[1] / "deploy" / "monitoring" / "prometheusrule.yaml"
RUNBOOK = "https://dbi.dev/docs/operations#"
HOUR = 3600


def instance(metric: str, name: str) -> str:
    return f'{metric}{{namespace="shop",name="{name}"}}'


def series(metric: str, name: str, values: Sequence[float | None]) -> dict[str, str]:
    """One series, a value per interval (None: no sample then, as when the worker stops
    serving it)."""
    shown = " ".join("_" if v is None else f"{v:g}" for v in values)
    return {"series": instance(metric, name), "values": shown}


def rule(alert: str) -> dict[str, Any]:
    (group,) = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    (found,) = [r for r in group["rules"] if r.get("alert") == alert]
    return cast(dict[str, Any], found)


def firing(alert: str, name: str, severity: str) -> dict[str, Any]:
    """What promtool must see fire: the instance's labels, and the rule's annotations with
    the instance filled in (the ``{{ $labels.X }}`` templates)."""
    labels = {"namespace": "shop", "name": name}
    annotations = {}
    for key, template in rule(alert)["annotations"].items():
        text = template
        for label, value in labels.items():
            text = text.replace(f"{{{{ $labels.{label} }}}}", value)
        annotations[key] = text
    assert annotations["runbook_url"] == RUNBOOK + alert.lower()
    assert annotations["summary"].startswith(f"shop/{name}: ")
    return {"exp_labels": {**labels, "severity": severity}, "exp_annotations": annotations}


def check(tmp_path: Path, interval: str, inputs: list[dict[str, str]], expected: list[Any]) -> None:
    """promtool evaluates the alerts over ``inputs`` (one sample per ``interval``) and
    compares each (eval_time, alertname, firing instances) of ``expected``."""
    rules = yaml.safe_load(RULES.read_text())["spec"]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    cases = [
        {
            "eval_time": at,
            "alertname": alert,
            "exp_alerts": [firing(alert, n, severity) for n in names],
        }
        for at, alert, severity, names in expected
    ]
    test = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": interval, "input_series": inputs, "alert_rule_test": cases}],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    done = promtool.evaluate(tmp_path / "test.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def test_wal_archiving_stuck_fires_after_15_minutes_and_clears_when_it_resumes(
    tmp_path: Path,
) -> None:
    """The archiver empties "stuck"'s spool each minute for 20 minutes, then no more (the
    worker goes on serving the last time it did) until minute 45; "fine" is emptied all
    along, an idle database whose check time is rewritten only every CHECKED_EVERY. The
    alert fires for "stuck" once 15 minutes have passed plus its 5 minutes `for`, and
    clears when archiving resumes."""
    minutes = range(61)
    stuck = [m * 60 if m <= 20 or m >= 45 else 20 * 60 for m in minutes]
    every = int(CHECKED_EVERY.total_seconds())
    fine = [m * 60 // every * every for m in minutes]
    inputs = [
        series("dbi_wal_archive_checked_timestamp_seconds", "stuck", stuck),
        series("dbi_wal_archive_checked_timestamp_seconds", "fine", fine),
        series("dbi_backup_scheduled_instance_created_timestamp_seconds", "stuck", [0] * 61),
        series("dbi_backup_scheduled_instance_created_timestamp_seconds", "fine", [0] * 61),
    ]
    check(
        tmp_path,
        "1m",
        inputs,
        [
            ("30m", "DbiWalArchivingStuck", "critical", []),  # 10 minutes without
            ("40m", "DbiWalArchivingStuck", "critical", []),  # pending: 15 minutes, not 20
            ("42m", "DbiWalArchivingStuck", "critical", ["stuck"]),
            ("50m", "DbiWalArchivingStuck", "critical", []),  # archiving resumed at 45
        ],
    )


def test_wal_archiving_stuck_fires_for_an_instance_never_archived(tmp_path: Path) -> None:
    """ "new" has backups scheduled since minute 0 and its spool was never emptied (no
    checked series at all); "off" has no backups (neither series)."""
    inputs = [series("dbi_backup_scheduled_instance_created_timestamp_seconds", "new", [0] * 31)]
    check(
        tmp_path,
        "1m",
        inputs,
        [
            ("15m", "DbiWalArchivingStuck", "critical", []),
            ("22m", "DbiWalArchivingStuck", "critical", ["new"]),
        ],
    )


def test_backup_overdue_fires_past_twice_the_schedule_and_failed_at_once(
    tmp_path: Path,
) -> None:
    """Hourly backups of "late" complete up to hour 3, then no more; "fine"'s go on. One
    of "broken"'s backups fails at hour 2 and the next completes."""
    steps = range(6 * 12 + 1)  # every 5 minutes for six hours
    completed_late = [min(s // 12, 3) * HOUR for s in steps]
    completed_fine = [(s // 12) * HOUR for s in steps]
    failed_broken: list[float | None] = [None if s < 24 else 2 * HOUR for s in steps]
    completed_broken = [(s // 12 if s < 24 or s >= 36 else 1) * HOUR for s in steps]
    inputs = [
        series("dbi_backup_interval_seconds", n, [HOUR] * len(steps))
        for n in ("late", "fine", "broken")
    ]
    inputs += [
        series("dbi_backup_last_completed_timestamp_seconds", "late", completed_late),
        series("dbi_backup_last_completed_timestamp_seconds", "fine", completed_fine),
        series("dbi_backup_last_completed_timestamp_seconds", "broken", completed_broken),
        series("dbi_backup_last_failed_timestamp_seconds", "broken", failed_broken),
    ]
    check(
        tmp_path,
        "5m",
        inputs,
        [
            ("4h", "DbiBackupOverdue", "critical", []),
            ("5h5m", "DbiBackupOverdue", "critical", []),  # pending: over 2 h for 10 min
            ("5h15m", "DbiBackupOverdue", "critical", ["late"]),
            ("2h5m", "DbiBackupFailed", "warning", ["broken"]),
            ("3h5m", "DbiBackupFailed", "warning", []),  # the next one completed
        ],
    )


def test_restore_test_failed_fires_at_once_and_clears_when_a_test_restores(
    tmp_path: Path,
) -> None:
    """Daily restore tests of "shaky": the second fails, the third restores; "fine"'s all
    restore, and "untested" has none yet (no series)."""
    day = 24  # samples, one an hour
    inputs = [
        series("dbi_restore_test_succeeded", "shaky", [1] * day + [0] * day + [1] * 2 * day),
        series("dbi_restore_test_succeeded", "fine", [1] * 4 * day),
        series("dbi_restore_test_succeeded", "untested", [None] * 4 * day),
    ]
    check(
        tmp_path,
        "1h",
        inputs,
        [
            ("1h", "DbiRestoreTestFailed", "critical", []),
            ("1d1h", "DbiRestoreTestFailed", "critical", ["shaky"]),
            ("2d1h", "DbiRestoreTestFailed", "critical", []),  # the next one restored
        ],
    )
