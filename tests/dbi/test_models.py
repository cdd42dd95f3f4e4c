"""The DBInstance models: defaults, validation, and the CRD rendered from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from dbi import crd, markdown
from dbi.fields import duration_seconds
from dbi.spec import DBInstanceSpec, DeletionPolicy, PowerState, ResizePolicy
from tests.dbi.specs import INVALID_SPECS, MINIMAL, spec_with


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
