"""Reading a stored DBInstance this worker's models cannot (plain data)."""

from __future__ import annotations

from typing import Any

import pytest

from dbi.spec import DeletionPolicy
from dbi.stored import read

SPEC: dict[str, Any] = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "deletionPolicy": "Delete",
}


def stored(spec: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "db", "namespace": "shop", "uid": "u1"},
        "spec": spec,
        "status": status or {},
    }


def test_a_readable_instance_reads_as_it_is() -> None:
    model, why = read(stored(SPEC))
    assert why is None and model.spec.resources.cpu == 1


@pytest.mark.parametrize(
    ("spec", "names", "policy"),
    [
        pytest.param(
            {**SPEC, "hibernation": {"window": "Sun 02:00-04:00"}},
            "spec.hibernation: Extra inputs are not permitted",
            DeletionPolicy.DELETE,
            id="a-newer-field",
        ),
        pytest.param(
            {**SPEC, "powerState": "Hibernated"},
            "spec.powerState: Input should be 'Running' or 'Stopped'",
            DeletionPolicy.DELETE,
            id="a-newer-enum-value",
        ),
        pytest.param(
            {**SPEC, "deletionPolicy": "Snapshot"},
            "spec.deletionPolicy: Input should be 'Delete' or 'Retain'",
            DeletionPolicy.RETAIN,
            id="an-unknown-policy-keeps-the-disks",
        ),
    ],
)
def test_an_unreadable_spec_names_the_field_and_keeps_the_deletion_policy(
    spec: dict[str, Any], names: str, policy: DeletionPolicy
) -> None:
    """The teardown goes by the stored deletionPolicy when that field reads, else Retain:
    a disk is never deleted on a guess."""
    model, why = read(stored(spec))
    assert why is not None and names in why
    assert model.spec.deletion_policy is policy


def test_many_errors_are_summed_up() -> None:
    spec = {**SPEC, "a": 1, "b": 2, "c": 3, "d": 4, "e": 5}
    _, why = read(stored(spec))
    assert why is not None and why.endswith("; and 2 more")


def test_a_status_a_newer_worker_wrote_reads_as_empty_and_the_spec_as_it_is() -> None:
    model, why = read(stored(SPEC, {"phase": "Hibernating", "conditions": []}))
    assert why is None
    assert model.status.phase is None
    assert model.spec.resources.cpu == 1
