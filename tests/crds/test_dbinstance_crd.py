"""The DBInstance CRD on a real API server: defaults, validation, status, kubectl."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client as k8s

from dbi import names
from dbi.models import Condition, ConditionStatus, DBInstanceStatus, Endpoint, Phase
from dbi.spec import DBInstanceSpec
from tests.dbi.specs import INVALID_SPECS, MINIMAL, spec_with
from tests.stack import Kubectl

pytestmark = [pytest.mark.stack, pytest.mark.usefixtures("dbinstance_crd")]


def manifest(name: str, namespace: str, spec: dict[str, Any]) -> str:
    return json.dumps(
        {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }
    )


def get(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    result = kubectl("get", "dbinstance", name, "-n", namespace, "-o", "json")
    return dict(json.loads(result.stdout))


def test_a_minimal_manifest_is_defaulted_as_the_models_default_it(
    kubectl: Kubectl, namespace: str
) -> None:
    """The API server fills every default exactly as the pydantic models do, field by field."""
    kubectl("apply", "-f", "-", stdin=manifest("minimal", namespace, MINIMAL))
    stored = get(kubectl, namespace, "minimal")["spec"]
    expected = DBInstanceSpec.model_validate(MINIMAL).model_dump(mode="json", exclude_none=True)
    assert stored == expected


@pytest.mark.parametrize(("path", "value", "field"), INVALID_SPECS)
def test_invalid_objects_are_rejected_naming_the_field(
    kubectl: Kubectl, namespace: str, path: str, value: Any, field: str
) -> None:
    """kubectl apply of an invalid object fails naming the field, and nothing is stored."""
    result = kubectl(
        "apply", "-f", "-", stdin=manifest("bad", namespace, spec_with(path, value)), check=False
    )
    assert result.returncode != 0
    assert field in result.stderr, result.stderr
    listed = kubectl("get", "dbinstances", "-n", namespace, "-o", "name").stdout
    assert listed == ""


@pytest.mark.parametrize(
    ("name", "message"),
    [
        pytest.param("a.b", "must be a DNS-1035 label", id="dotted"),
        pytest.param("9lives", "must be a DNS-1035 label", id="leading-digit"),
        pytest.param("d" * (names.INSTANCE_NAME_MAX + 1), "must be at most 51", id="too-long"),
    ],
)
def test_a_name_a_child_cannot_carry_is_rejected(
    kubectl: Kubectl, namespace: str, name: str, message: str
) -> None:
    """Every child's name is <name>-<suffix>: a name that would make one invalid (a '.',
    a leading digit, too long for <name>-credentials) is refused at apply, naming the field."""
    result = kubectl("apply", "-f", "-", stdin=manifest(name, namespace, MINIMAL), check=False)
    assert result.returncode != 0
    assert "metadata.name" in result.stderr and message in result.stderr, result.stderr
    assert kubectl("get", "dbinstances", "-n", namespace, "-o", "name").stdout == ""


def test_the_longest_name_and_a_version_as_a_string_are_accepted(
    kubectl: Kubectl, namespace: str
) -> None:
    """A 51-character name fits; version "18" is stored as written and reads as 18."""
    name = "d" * names.INSTANCE_NAME_MAX
    kubectl("apply", "-f", "-", stdin=manifest(name, namespace, {**MINIMAL, "version": "18"}))
    stored = get(kubectl, namespace, name)["spec"]
    assert stored["version"] == "18"
    assert DBInstanceSpec.model_validate(stored).version == 18
    changed = kubectl(
        "apply", "-f", "-", stdin=manifest(name, namespace, {**MINIMAL, "version": 18})
    )
    assert changed.returncode == 0  # "18" to 18 is no change of version


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        pytest.param(
            ("resources.storage", "10Gi", "5Gi"),
            ("spec.resources", "storage may grow but never shrink"),
            id="storage-shrink",
        ),
        pytest.param(("version", 18, 17), ("spec.version", "never down"), id="version-downgrade"),
        pytest.param(
            ("version", 18, "16"), ("spec.version", "never down"), id="version-downgrade-string"
        ),
        pytest.param(
            ("credentials.username", "app", "orders"),
            ("spec.credentials.username", "is immutable"),
            id="username-change",
        ),
        pytest.param(
            ("restore.from", {"backup": "db-20261201-030000"}, {"backup": "db-20261202-030000"}),
            ("spec", "restore is set when the instance is created, and never changed"),
            id="restore-change",
        ),
    ],
)
def test_forbidden_changes_are_rejected_naming_the_field(
    kubectl: Kubectl, namespace: str, change: tuple[str, Any, Any], expected: tuple[str, str]
) -> None:
    """An update that shrinks storage or changes an immutable field is refused; the object stays."""
    path, before, after = change
    field, message = expected
    kubectl("apply", "-f", "-", stdin=manifest("db", namespace, spec_with(path, before)))
    result = kubectl(
        "apply", "-f", "-", stdin=manifest("db", namespace, spec_with(path, after)), check=False
    )
    assert result.returncode != 0
    assert field in result.stderr and message in result.stderr, result.stderr
    stored: Any = get(kubectl, namespace, "db")["spec"]
    for key in path.split("."):
        stored = stored[key]
    assert stored == before


def test_storage_may_grow(kubectl: Kubectl, namespace: str) -> None:
    """Growing storage, also across units, is accepted."""
    kubectl(
        "apply", "-f", "-", stdin=manifest("db", namespace, spec_with("resources.storage", "10Gi"))
    )
    kubectl(
        "apply",
        "-f",
        "-",
        stdin=manifest("db", namespace, spec_with("resources.storage", "20000Mi")),
    )
    assert get(kubectl, namespace, "db")["spec"]["resources"]["storage"] == "20000Mi"


def test_unknown_fields_are_pruned_when_validation_is_lenient(
    kube_api: Any, namespace: str
) -> None:
    """A client that does not ask for strict validation gets unknown fields dropped, not stored."""
    body = json.loads(manifest("lenient", namespace, {**MINIMAL, "replicas": 3}))
    objects = k8s.CustomObjectsApi(kube_api)
    objects.create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, body, field_validation="Ignore"
    )
    stored = _read(objects, namespace, "lenient")
    assert "replicas" not in stored["spec"]


def _read(objects: Any, namespace: str, name: str) -> dict[str, Any]:
    found = objects.get_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, name
    )
    return cast(dict[str, Any], found)


def _status() -> DBInstanceStatus:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    return DBInstanceStatus(
        phase=Phase.RUNNING,
        conditions=[
            Condition(
                type="Ready",
                status=ConditionStatus.TRUE,
                reason="Converged",
                message="Every step is satisfied.",
                last_transition_time=now,
                observed_generation=1,
            )
        ],
        observed_generation=1,
        endpoint=Endpoint(host="127.0.10.2", port=5432),
        credentials_secret_name="minimal-credentials",  # noqa: S106 (a name, not a password)
        workflow_id=names.workflow_id("ns", "minimal"),
    )


def test_a_status_from_the_models_is_stored_as_written(kube_api: Any, namespace: str) -> None:
    """Status written from the models through the status subresource reads back identical."""
    objects = k8s.CustomObjectsApi(kube_api)
    body = json.loads(manifest("withstatus", namespace, MINIMAL))
    objects.create_namespaced_custom_object(
        names.GROUP, names.VERSION, namespace, names.PLURAL, body
    )
    status = _status().model_dump(mode="json", exclude_none=True)
    objects.patch_namespaced_custom_object_status(
        names.GROUP, names.VERSION, namespace, names.PLURAL, "withstatus", {"status": status}
    )
    stored = _read(objects, namespace, "withstatus")
    assert DBInstanceStatus.model_validate(stored["status"]) == _status()


def test_kubectl_get_dbi_shows_the_columns(kube_api: Any, kubectl: Kubectl, namespace: str) -> None:
    """`kubectl get dbi` shows phase, readiness, endpoint and size at a glance."""
    kubectl("apply", "-f", "-", stdin=manifest("shown", namespace, MINIMAL))
    k8s.CustomObjectsApi(kube_api).patch_namespaced_custom_object_status(
        names.GROUP,
        names.VERSION,
        namespace,
        names.PLURAL,
        "shown",
        {"status": _status().model_dump(mode="json", exclude_none=True)},
    )
    header, row = kubectl("get", "dbi", "-n", namespace).stdout.splitlines()
    assert header.split() == [
        "NAME",
        "PHASE",
        "READY",
        "ENDPOINT",
        "INSTANCES",
        "PRIMARY",
        "CPU",
        "MEMORY",
        "STORAGE",
        "AGE",
    ]
    # INSTANCES and PRIMARY are blank without spec.instances.
    assert row.split()[:7] == ["shown", "Running", "True", "127.0.10.2", "2", "2Gi", "10Gi"]


def test_kubectl_explain_shows_the_descriptions(kubectl: Kubectl) -> None:
    """`kubectl explain` documents the spec with the models' descriptions."""
    explained = kubectl("explain", "dbinstance.spec.resources").stdout
    described = DBInstanceSpec.model_fields["resources"].description
    assert described is not None and described in " ".join(explained.split())
    for field in ("cpu", "memory", "storage"):
        assert f"{field}\t" in explained or f"  {field}" in explained
    assert "never shrink" in " ".join(
        kubectl("explain", "dbinstance.spec.resources.storage").stdout.split()
    )


def test_the_sample_manifest_applies_as_is(
    kubectl: Kubectl, namespace: str, repo_root: Path
) -> None:
    """deploy/samples/dbinstance.yaml is accepted by the models and by the API server."""
    sample = repo_root / "deploy" / "samples" / "dbinstance.yaml"
    DBInstanceSpec.model_validate(yaml.safe_load(sample.read_text())["spec"])
    kubectl("apply", "-n", namespace, "-f", str(sample))
    assert get(kubectl, namespace, "orders")["spec"]["resources"]["cpu"] == 2


def test_kubectl_delete_all_leaves_the_databases(kubectl: Kubectl, namespace: str) -> None:
    """`kubectl delete all --all` (a common clean-up of Deployments and Services) neither
    lists nor deletes a DBInstance: deleting one under deletionPolicy Delete deletes
    its disks, so it must be named."""
    kubectl("apply", "-f", "-", stdin=manifest("kept", namespace, MINIMAL))
    kubectl("create", "service", "clusterip", "web", "--tcp=80:80", "-n", namespace)
    assert "dbinstance" not in kubectl("get", "all", "-n", namespace, "-o", "name").stdout
    kubectl("delete", "all", "--all", "-n", namespace, "--wait=false")
    assert get(kubectl, namespace, "kept")["metadata"]["name"] == "kept"
    assert "service/web" not in kubectl("get", "all", "-n", namespace, "-o", "name").stdout
