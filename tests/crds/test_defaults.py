"""The CRD defaults nothing a worker of an earlier release cannot read (plain data).

The API server fills a default into every stored object, on every read. A defaulted
field that 0.1.0's models do not know would reach all instances the moment the new CRD
is applied, before the new worker: 0.1.0's worker, whose models refuse unknown fields,
would then read none of them (SpecUnreadable, each stalled until touched). A new field
is optional without a default (its own fields may have defaults: they appear only
where a user set the field, whom the skew test covers).
"""

from __future__ import annotations

from typing import Any

from dbi import crd

# The spec fields 0.1.0's CRD defaults (542c8b5, crds/dbinstance.yaml).
DEFAULTED_IN_0_1_0 = frozenset(
    {
        "backup.onDelete",
        "backup.retention",
        "backup.retention.count",
        "backup.suspended",
        "backup.target.s3.prefix",
        "credentials",
        "credentials.database",
        "credentials.username",
        "deletionPolicy",
        "healthCheckInterval",
        "monitoring",
        "monitoring.enabled",
        "powerState",
        "resizePolicy",
    }
)


def always_there(schema: dict[str, Any], path: str = "", present: bool = True) -> set[str]:
    """The paths under ``schema`` the API server fills into every object: defaulted
    fields whose parents are all there (the spec itself, or defaulted in turn)."""
    found = set()
    for name, node in (schema.get("properties") or {}).items():
        where = f"{path}.{name}" if path else name
        filled = present and ("default" in node or name in schema.get("required", []))
        if present and "default" in node:
            found.add(where)
        found |= always_there(node, where, filled)
    return found


def test_every_field_the_crd_fills_in_is_one_0_1_0_reads() -> None:
    spec = crd.render()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    filled = always_there(spec)
    assert filled - DEFAULTED_IN_0_1_0 == set(), (
        "the CRD would fill these into every stored instance, which 0.1.0's worker cannot "
        "read: make them optional, without a default"
    )
