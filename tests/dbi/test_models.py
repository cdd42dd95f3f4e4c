"""The DBInstance models: defaults, validation, and the CRD rendered from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dbi import crd, markdown
from dbi.spec import DBInstanceSpec, DeletionPolicy, PowerState, ResizePolicy, duration_seconds

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


def test_a_minimal_spec_takes_every_default() -> None:
    """Version and resources alone make a complete spec with the documented defaults."""
    spec = DBInstanceSpec.model_validate(MINIMAL)
    assert spec.power_state is PowerState.RUNNING
    assert spec.resize_policy is ResizePolicy.RESTART
    assert spec.deletion_policy is DeletionPolicy.DELETE
    assert (spec.credentials.username, spec.credentials.database) == ("app", "app")
    assert spec.monitoring.enabled is True
    assert spec.health_check_interval == "5m"
    assert spec.image is None


@pytest.mark.parametrize("written", [18, "18"])
def test_a_version_is_a_number_or_a_string(written: int | str) -> None:
    """18 and "18" are the same version (many operators take either)."""
    assert DBInstanceSpec.model_validate({**MINIMAL, "version": written}).version == 18


@pytest.mark.parametrize(
    ("memory", "mebibytes"),
    [
        pytest.param("1000M", 954, id="decimal-megabytes"),
        pytest.param("4G", 3815, id="decimal-gigabytes"),
        pytest.param("1.5Gi", 1536, id="fractional-gibibytes"),
        pytest.param("1Gi", 1024, id="whole"),
    ],
)
def test_memory_the_vm_gets_is_rounded_up_to_whole_mebibytes(memory: str, mebibytes: int) -> None:
    """A VM's guest memory is whole MiB: the spec's quantity rounds up (never less than
    asked), and every comparison uses the rounded figure."""
    resources = DBInstanceSpec.model_validate(
        {**MINIMAL, "resources": {**MINIMAL["resources"], "memory": memory}}
    ).resources
    assert resources.memory_mebibytes() == mebibytes
    assert resources.memory_bytes() == mebibytes * 2**20


def test_the_wire_form_is_camel_case() -> None:
    """Specs read and write the camelCase field names users write in manifests."""
    spec = DBInstanceSpec.model_validate({**MINIMAL, "powerState": "Stopped"})
    dumped = spec.model_dump(mode="json", exclude_none=True)
    assert dumped["powerState"] == "Stopped"
    assert "healthCheckInterval" in dumped and "power_state" not in dumped


@pytest.mark.parametrize(("path", "value", "field"), INVALID_SPECS)
def test_invalid_specs_are_rejected_naming_the_field(path: str, value: Any, field: str) -> None:
    """The models reject each invalid spec with an error located at the offending field."""
    with pytest.raises(ValidationError) as raised:
        DBInstanceSpec.model_validate(spec_with(path, value))
    locations = {"spec." + ".".join(str(p) for p in e["loc"]) for e in raised.value.errors()}
    assert any(loc.startswith(field) for loc in locations), locations


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("30s", 30, id="seconds"),
        pytest.param("5m", 300, id="minutes"),
        pytest.param("1h30m", 5400, id="compound"),
        pytest.param("1500ms", 1.5, id="milliseconds"),
    ],
)
def test_durations_read_as_go_reads_them(text: str, seconds: float) -> None:
    """healthCheckInterval uses Go's duration syntax, as the CRD's CEL rule does."""
    assert duration_seconds(text) == seconds


def test_the_documented_rules_are_the_crds(repo_root: Path) -> None:
    """docs/dbinstance.md lists every rule the CRD enforces, as rendered from it."""
    text = (repo_root / "docs" / "dbinstance.md").read_text()
    rendered = markdown.replace_between(text, crd.RULES_START, crd.RULES_END, crd.rules_table())
    assert rendered == text, "run: python -m dbi.crd --rules (into docs/dbinstance.md)"
    assert "must be a quantity from 512Mi to 1Ti" in crd.rules_table()


def test_the_committed_crd_is_rendered_from_the_models(repo_root: Path) -> None:
    """crds/dbinstance.yaml is exactly what `python -m dbi.crd` renders from the models."""
    committed = (repo_root / "crds" / "dbinstance.yaml").read_text()
    assert committed == crd.to_yaml(), "run: python -m dbi.crd > crds/dbinstance.yaml"


def _undescribed(schema: dict[str, Any], path: str) -> list[str]:
    """Return the paths under ``schema`` whose properties lack a description."""
    missing = []
    for name, prop in schema.get("properties", {}).items():
        if not prop.get("description"):
            missing.append(f"{path}.{name}")
        missing += _undescribed(prop, f"{path}.{name}")
        missing += _undescribed(prop.get("items", {}), f"{path}.{name}[]")
    return missing


def test_every_field_of_the_crd_has_a_description() -> None:
    """`kubectl explain` has a description for every spec and status field."""
    root = crd.render()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _undescribed(root["properties"]["spec"], "spec") == []
    assert _undescribed(root["properties"]["status"], "status") == []
