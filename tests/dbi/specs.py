"""DBInstance specs: the smallest valid one, one with a field changed, and invalid
ones with the field each names."""

from __future__ import annotations

from typing import Any

import pytest

MINIMAL: dict[str, Any] = {
    "version": 18,
    "resources": {"cpu": 2, "memory": "2Gi", "storage": "10Gi"},
}


def spec_with(path: str, value: Any) -> dict[str, Any]:
    """Return a copy of MINIMAL with the dotted ``path`` set to ``value`` (None removes it)."""
    spec: dict[str, Any] = {"version": 18, "resources": dict(MINIMAL["resources"])}
    *parents, leaf = path.split(".")
    node = spec
    for key in parents:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(leaf, None)
    else:
        node[leaf] = value
    return spec


# (why, spec.restore besides its from, what the error names)
RESTORE_INVALID: list[tuple[str, dict[str, Any], str]] = [
    ("lsn-junk", {"lsn": "0/3000060'"}, "spec.restore.lsn"),
    ("immediate-junk", {"immediate": "yes please"}, "spec.restore.immediate"),
    ("lsn-no-slash", {"lsn": "3000060"}, "spec.restore.lsn"),
    (
        "two-targets",
        {"lsn": "0/3000060", "pointInTime": "2026-12-07T10:00:00Z"},
        "spec.restore",
    ),
    (
        "immediate-and-a-target",
        {"immediate": True, "pointInTime": "2026-12-07T10:00:00Z"},
        "spec.restore",
    ),
]

# (field path, value, what the error names): rejected by the models and, in
# tests/crds/test_dbinstance_crd.py, by the API server with the same field named.
INVALID_SPECS = [
    pytest.param("resources.cpu", 0, "spec.resources.cpu", id="cpu-zero"),
    pytest.param("resources.cpu", "two", "spec.resources.cpu", id="cpu-not-a-number"),
    pytest.param("resources.memory", "lots", "spec.resources.memory", id="memory-bad-quantity"),
    pytest.param("resources.memory", "128Mi", "spec.resources.memory", id="memory-too-small"),
    pytest.param("resources.memory", "2Ti", "spec.resources.memory", id="memory-too-large"),
    pytest.param("resources.storage", "-10Gi", "spec.resources.storage", id="storage-negative"),
    pytest.param("resources.storage", "65Ti", "spec.resources.storage", id="storage-too-large"),
    pytest.param("resources", None, "spec.resources", id="resources-missing"),
    pytest.param("powerState", "Paused", "spec.powerState", id="unknown-power-state"),
    pytest.param("resizePolicy", "Later", "spec.resizePolicy", id="unknown-resize-policy"),
    pytest.param("version", 14, "spec.version", id="unsupported-version"),
    pytest.param("version", "19", "spec.version", id="unsupported-version-string"),
    pytest.param("version", "eighteen", "spec.version", id="version-not-a-number"),
    pytest.param("healthCheckInterval", "5 minutes", "spec.healthCheckInterval", id="bad-interval"),
    pytest.param("healthCheckInterval", "1s", "spec.healthCheckInterval", id="interval-too-short"),
    pytest.param(
        "credentials.username", "postgres", "spec.credentials.username", id="reserved-username"
    ),
    pytest.param(
        "credentials.database", "Orders-DB", "spec.credentials.database", id="bad-database-name"
    ),
    pytest.param("image", "no-namespace", "spec.image", id="image-without-namespace"),
    pytest.param("replicas", 3, "spec.replicas", id="unknown-field"),
    pytest.param("backup.schedule", "@every 1s", "spec.backup.schedule", id="backup-too-often"),
    pytest.param("backup.schedule", "0 3 * *", "spec.backup.schedule", id="backup-four-fields"),
    pytest.param("backup.schedule", "0 3 * * *; rm", "spec.backup.schedule", id="backup-junk"),
    pytest.param("backup.retention", {"count": 0}, "spec.backup.retention", id="keep-none"),
    pytest.param("backup.retention", {"maxAge": "7d"}, "spec.backup.retention", id="max-age-days"),
    *[
        pytest.param("restore", {"from": {"instance": "db"}, **given}, field, id=f"restore-{why}")
        for why, given, field in RESTORE_INVALID
    ],
    *[
        pytest.param(
            "backup",
            {"schedule": "@daily", "restoreTest": given},
            f"spec.backup.restoreTest.{field}",
            id=f"restore-test-{why}",
        )
        for why, given, field in [
            ("timeout-too-short", {"timeout": "5m"}, "timeout"),
            ("timeout-too-long", {"timeout": "49h"}, "timeout"),
            ("too-often", {"schedule": "@every 1s"}, "schedule"),
        ]
    ],
    *[
        pytest.param(
            "backup",
            {"schedule": "@daily", "archiveTimeout": given},
            "spec.backup.archiveTimeout",
            id=f"archive-timeout-{why}",
        )
        for why, given in [("too-short", "10s"), ("too-long", "25h"), ("words", "5 minutes")]
    ],
    *[
        pytest.param("postgresql.parameters", given, field, id=f"parameters-{why}")
        for why, given, field in [
            ("ssl", {"ssl": "off"}, "spec.postgresql.parameters"),
            ("ssl-ciphers", {"ssl_ciphers": "NULL"}, "spec.postgresql.parameters"),
            ("command", {"archive_command": "curl x"}, "spec.postgresql.parameters"),
            ("directory", {"log_directory": "/etc"}, "spec.postgresql.parameters"),
            ("preload", {"shared_preload_libraries": "x"}, "spec.postgresql.parameters"),
            ("listen", {"listen_addresses": "*"}, "spec.postgresql.parameters"),
            ("durability", {"fsync": "off"}, "spec.postgresql.parameters"),
            ("upper-case", {"Work_Mem": "4MB"}, "spec.postgresql.parameters"),
            ("quoted", {"work_mem'": "4MB"}, "spec.postgresql.parameters"),
            ("number", {"work_mem": 64}, "spec.postgresql.parameters.work_mem"),
            ("too-long", {"work_mem": "1" * 257}, "spec.postgresql.parameters.work_mem"),
            ("too-many", {f"p{i}": "1" for i in range(65)}, "spec.postgresql.parameters"),
        ]
    ],
    *[
        pytest.param("maintenance.window", window, "spec.maintenance.window", id=f"window-{why}")
        for why, window in [
            ("no-opening", {"duration": "4h"}),
            ("start-and-schedule", {"start": "02:00", "schedule": "0 2 * * *", "duration": "4h"}),
            ("days-without-start", {"days": ["Sat"], "schedule": "0 2 * * 6", "duration": "1h"}),
            ("hour-24", {"start": "24:00", "duration": "1h"}),
            ("start-without-colon", {"start": "0200", "duration": "1h"}),
            ("too-long", {"start": "02:00", "duration": "169h"}),
            ("too-short", {"start": "02:00", "duration": "30s"}),
            ("duration-in-days", {"start": "02:00", "duration": "1d"}),
            ("day-name", {"days": ["Saturday"], "start": "02:00", "duration": "1h"}),
            ("no-days", {"days": [], "start": "02:00", "duration": "1h"}),
            ("cron-four-fields", {"schedule": "0 2 * *", "duration": "1h"}),
            ("cron-junk", {"schedule": "0 2 * * 6; rm", "duration": "1h"}),
            ("no-duration", {"start": "02:00"}),
        ]
    ],
]
