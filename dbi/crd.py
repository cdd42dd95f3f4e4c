"""Render the DBInstance, DBBackup, DBDatabase and DBRole CustomResourceDefinitions
from the pydantic models.

``crds/dbinstance.yaml``, ``crds/dbbackup.yaml``, ``crds/dbdatabase.yaml`` and
``crds/dbrole.yaml`` are this module's output, committed
so users can apply them without Python; a test fails when a file and the models drift
apart. Regenerate with ``python -m dbi.crd > crds/dbinstance.yaml``,
``python -m dbi.crd --backup > crds/dbbackup.yaml`` (``--database``, ``--role``: the
same for dbdatabase.yaml and dbrole.yaml).

Pydantic's JSON Schema is turned into a Kubernetes structural schema: references
inlined, ``anyOf [X, null]`` collapsed to an optional ``X``, titles dropped, nested
object defaults reduced to ``{}`` (so the API server defaults their fields one by
one), and under status, which only the orchestrator writes, one default alone:
``observedGeneration: 0``, so that a DBInstance no pass has seen yet reads as "this
generation is not observed" (kstatus InProgress), never as a healthy object.
"""

from __future__ import annotations

import sys
from typing import Any

import yaml
from pydantic import BaseModel

from dbi import names
from dbi.backups import DBBackupSpec, DBBackupStatus
from dbi.models import DBInstanceStatus
from dbi.name_rules import NAME_RULES
from dbi.objects import KINDS, ObjectStatus
from dbi.spec import DBInstanceSpec

_KEEP = {
    "type",
    "description",
    "enum",
    "default",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "maxProperties",
    "pattern",
    "format",
    "required",
    "x-kubernetes-validations",
    "x-kubernetes-int-or-string",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
}

PRINTER_COLUMNS = [
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
    },
    {"name": "Endpoint", "type": "string", "jsonPath": ".status.endpoint.host"},
    {"name": "Instances", "type": "integer", "jsonPath": ".spec.instances"},
    {"name": "Primary", "type": "string", "jsonPath": ".status.primary"},
    {"name": "CPU", "type": "integer", "jsonPath": ".spec.resources.cpu"},
    {"name": "Memory", "type": "string", "jsonPath": ".spec.resources.memory"},
    {"name": "Storage", "type": "string", "jsonPath": ".spec.resources.storage"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def structural(schema: dict[str, Any], defs: dict[str, Any], *, defaults: bool) -> dict[str, Any]:
    """Return the Kubernetes structural form of one pydantic JSON Schema node."""
    node = dict(schema)
    if "$ref" in node:
        target = defs[node.pop("$ref").rsplit("/", 1)[1]]
        node = {**target, **node}
    if "anyOf" in node:
        branches = [b for b in node.pop("anyOf") if b.get("type") != "null"]
        if len(branches) != 1:
            raise ValueError(f"cannot render a union of {branches} as a structural schema")
        node = {**structural(branches[0], defs, defaults=defaults), **node}
        if node.get("default", ...) is None:
            del node["default"]
    out = {k: v for k, v in node.items() if k in _KEEP}
    if "properties" in node:
        out["type"] = "object"
        out["properties"] = {
            name: structural(prop, defs, defaults=defaults)
            for name, prop in node["properties"].items()
        }
    if "items" in node:
        out["items"] = structural(node["items"], defs, defaults=defaults)
    if isinstance(node.get("additionalProperties"), dict):  # a map: its values' schema
        out["additionalProperties"] = structural(
            node["additionalProperties"], defs, defaults=defaults
        )
    if not defaults:
        out.pop("default", None)
    elif isinstance(out.get("default"), dict):
        out["default"] = {}
    return out


def _schema_of(model: type[BaseModel], *, defaults: bool) -> dict[str, Any]:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return structural(raw, raw.get("$defs", {}), defaults=defaults)


def render() -> dict[str, Any]:
    """Return the DBInstance CustomResourceDefinition as a dict."""
    spec = _schema_of(DBInstanceSpec, defaults=True)
    status = _schema_of(DBInstanceStatus, defaults=False)
    status["default"] = {}
    status["properties"]["observedGeneration"]["default"] = 0
    description = (
        "A managed PostgreSQL instance running in a KubeVirt virtual machine, converged by "
        "the dbi orchestrator."
    )
    return _definition(
        (names.KIND, names.PLURAL, names.SHORT_NAME),
        PRINTER_COLUMNS,
        _root(description, spec, status, NAME_RULES),
    )


BACKUP_COLUMNS = [
    {"name": "Instance", "type": "string", "jsonPath": ".spec.instance"},
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Trigger", "type": "string", "jsonPath": ".spec.trigger"},
    {"name": "Size", "type": "integer", "jsonPath": ".status.sizeBytes"},
    {"name": "Version", "type": "string", "jsonPath": ".status.postgresVersion"},
    {"name": "Started", "type": "date", "jsonPath": ".status.startedAt"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def render_backup() -> dict[str, Any]:
    """Return the DBBackup CustomResourceDefinition as a dict."""
    description = (
        "One physical backup of a DBInstance (pg_basebackup and the WAL that makes it "
        "consistent) in the orchestrator's backup store; created and written by dbi."
    )
    spec = _schema_of(DBBackupSpec, defaults=True)
    status = _schema_of(DBBackupStatus, defaults=False)
    return _definition(
        (names.BACKUP_KIND, names.BACKUP_PLURAL, "dbbk"),
        BACKUP_COLUMNS,
        _root(description, spec, status, []),
    )


READY_COLUMN = {
    "name": "Ready",
    "type": "string",
    "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
}
INSTANCE_COLUMN = {"name": "Instance", "type": "string", "jsonPath": ".spec.instance"}
AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
# The kinds declared on an instance (dbi.objects.KINDS): short name, printer columns,
# description, and the flag of ``python -m dbi.crd`` that renders it.
OBJECT_CRDS: dict[str, tuple[str, list[dict[str, str]], str, str]] = {
    names.DATABASE_KIND: (
        "dbdb",
        [
            INSTANCE_COLUMN,
            {"name": "Database", "type": "string", "jsonPath": ".spec.name"},
            READY_COLUMN,
            {"name": "Policy", "type": "string", "jsonPath": ".spec.deletionPolicy"},
            AGE_COLUMN,
        ],
        "A PostgreSQL database on a DBInstance in the same namespace, created, owned and "
        "dropped (deletionPolicy Delete) by dbi.",
        "--database",
    ),
    names.ROLE_KIND: (
        "dbrole",
        [
            INSTANCE_COLUMN,
            {"name": "Role", "type": "string", "jsonPath": ".spec.name"},
            READY_COLUMN,
            {"name": "Login", "type": "boolean", "jsonPath": ".spec.login"},
            AGE_COLUMN,
        ],
        "A PostgreSQL role on a DBInstance in the same namespace, with its credentials "
        "Secret <name>-credentials, created, granted and dropped by dbi.",
        "--role",
    ),
}


def render_object(kind: str) -> dict[str, Any]:
    """Return the CustomResourceDefinition of a kind declared on an instance."""
    short, columns, description, _ = OBJECT_CRDS[kind]
    spec = _schema_of(KINDS[kind].spec, defaults=True)
    status = _schema_of(ObjectStatus, defaults=False)
    root = _root(description, spec, status, [])
    return _definition((kind, KINDS[kind].plural, short), columns, root)


def _root(
    description: str, spec: dict[str, Any], status: dict[str, Any], rules: list[dict[str, str]]
) -> dict[str, Any]:
    """The openAPIV3Schema of a resource with a spec and a status."""
    return {
        "type": "object",
        "description": description,
        "required": ["spec"],
        **({"x-kubernetes-validations": rules} if rules else {}),
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
    }


def _definition(
    kind_names: tuple[str, str, str], columns: list[dict[str, str]], root: dict[str, Any]
) -> dict[str, Any]:
    """The CustomResourceDefinition of (kind, plural, short name) in dbi's group."""
    kind, plural, short_name = kind_names
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{names.GROUP}"},
        "spec": {
            "group": names.GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short_name],
                # No "all" category: `kubectl delete all --all` must not delete databases.
            },
            "versions": [
                {
                    "name": names.VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


RULES_START, RULES_END = "<!-- rules:start -->", "<!-- rules:end -->"


def _checks(node: dict[str, Any]) -> list[str]:
    """What the API server checks of one schema node, as people read it."""
    found = []
    if "enum" in node:
        found.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    if "minimum" in node or "maximum" in node:
        found.append(f"from {node.get('minimum', '-')} to {node.get('maximum', '-')}")
    if "minLength" in node or "maxLength" in node:
        found.append(f"{node.get('minLength', 0)} to {node['maxLength']} characters")
    if "pattern" in node:
        found.append(f"matches `{node['pattern']}`")
    found += [f"{rule['message']} (CEL)" for rule in node.get("x-kubernetes-validations", [])]
    return found


def _walk(node: dict[str, Any], path: str, required: bool) -> list[tuple[str, list[str]]]:
    checks = (["it is set"] if required else []) + _checks(node)
    rows = [(path, checks)] if checks else []
    for name, child in node.get("properties", {}).items():
        rows += _walk(child, f"{path}.{name}", name in node.get("required", []))
    return rows


def rules_table() -> str:
    """The table of every rule the API server enforces on a DBInstance's name and spec,
    rendered from the CRD (docs/dbinstance.md holds it between markers)."""
    root = render()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    lines = ["| field | the API server refuses it unless |", "|---|---|"]
    lines += [
        f"| `{rule.get('fieldPath', '.metadata.name').lstrip('.')}` | {rule['message']} (CEL) |"
        for rule in NAME_RULES
    ]
    for path, checks in _walk(root["properties"]["spec"], "spec", required=True):
        cell = "; ".join(checks).replace("|", "\\|")  # a pattern's | would end the cell
        lines.append(f"| `{path}` | {cell} |")
    return "\n".join(lines) + "\n"


def to_yaml() -> str:
    """Return the CRD as the YAML document committed in crds/dbinstance.yaml."""
    header = "# Generated by `python -m dbi.crd` from dbi/spec.py and dbi/models.py; do not edit.\n"
    return header + yaml.safe_dump(render(), sort_keys=False, width=100)


def backup_yaml() -> str:
    """Return the DBBackup CRD as the YAML document committed in crds/dbbackup.yaml."""
    header = "# Generated by `python -m dbi.crd --backup` from dbi/backups.py; do not edit.\n"
    return header + yaml.safe_dump(render_backup(), sort_keys=False, width=100)


def object_yaml(kind: str) -> str:
    """Return a declared kind's CRD as the YAML document committed in crds/."""
    flag, source = OBJECT_CRDS[kind][3], KINDS[kind].spec.__module__.replace(".", "/")
    header = f"# Generated by `python -m dbi.crd {flag}` from {source}.py; do not edit.\n"
    return header + yaml.safe_dump(render_object(kind), sort_keys=False, width=100)


if __name__ == "__main__":
    if sys.argv[1:] == ["--rules"]:
        sys.stdout.write(rules_table())
    elif flagged := [k for k, crd in OBJECT_CRDS.items() if sys.argv[1:] == [crd[3]]]:
        sys.stdout.write(object_yaml(flagged[0]))
    elif sys.argv[1:] == ["--backup"]:
        sys.stdout.write(backup_yaml())
    else:
        sys.stdout.write(to_yaml())
