"""A corpus of invalid and edge-case DBInstance manifests, generated from a few tables.

Each case is a whole manifest and what must become of it on a real API server:

- ``field`` set: the API server refuses it (with kubectl's strict field validation) and
  its message names ``field``;
- ``field`` None: it is stored, the worker's model reads it, and the instance ends
  with condition ``expect`` (Ready/Converged unless the case says otherwise), whose
  message names ``names`` when the case sets it.

The tables are by field: each lists values a user (or a tool, or an attacker) might
write there, with the outcome. ``cases()`` crosses them with the manifest's shape
(missing and null fields, wrong types, unknown fields, names, annotations) and gives
every case its own instance name.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dbi import names

# A value standing for JSON null in a table (None there means: remove the field).
NULL = object()
ACCEPT = None
READY = ("Ready", "Converged")

BASE: dict[str, Any] = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"},
    "healthCheckInterval": "24h",
}


@dataclass(frozen=True)
class Case:
    id: str
    manifest: dict[str, Any]
    field: str | None  # None: accepted
    expect: tuple[str, str] = READY  # accepted: the condition (type, reason) it ends with
    names: str | None = None  # accepted: what that condition's message must name
    # Accepted cases whose stored spec reads the same converge alike; one of each runs.
    converge: bool = True


def _set(tree: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``tree`` with dotted ``path`` set (NULL: JSON null; None: removed)."""
    out = copy.deepcopy(tree)
    *parents, leaf = path.split(".")
    node = out
    for key in parents:
        if not isinstance(node.get(key), dict):
            node[key] = {}
        node = node[key]
    if value is None:
        node.pop(leaf, None)
    else:
        node[leaf] = None if value is NULL else value
    return out


# field path under spec -> [(value, accepted?)]: True accepted (Ready), False refused.
SPEC_VALUES: dict[str, list[tuple[Any, bool]]] = {
    "version": [
        (16, True),
        (17, True),
        ("16", True),
        ("17", True),
        ("18", True),
        (15, False),
        (19, False),
        (0, False),
        (-18, False),
        (2**63, False),
        ("", False),
        ("18.1", False),
        ("eighteen", False),
        (" 18", False),
        ("18 ", False),
        ("\uff11\uff18", False),  # fullwidth digits
        ("v18", False),
        (18.5, False),
        (True, False),
        ([], False),
        ({}, False),
        (NULL, False),
        (None, False),
    ],
    "image": [
        ("", False),
        ("postgres-18", False),
        ("Dbi-Images/postgres-18", False),
        ("dbi-images/postgres 18", False),
        ("a/b/c", False),
        ("dbi-images/po\u0441tgres-18", False),  # a Cyrillic s
        ("-x/postgres-18", False),
        ("dbi-images/postgres-18-", False),
        ("n/" + "p" * 200, False),
        ("../etc/passwd", False),
        (18, False),
        (True, False),
        (["dbi-images/postgres-18"], False),
    ],
    "resources.cpu": [
        (1, True),
        (2, True),
        (0, False),
        (-1, False),
        (129, False),
        (2**31, False),
        (2**63, False),
        (1.5, False),
        ("2", False),
        ("two", False),
        (True, False),
        ([2], False),
        ({}, False),
        (NULL, False),
        (None, False),
    ],
    "resources.memory": [
        ("512Mi", True),
        ("1000M", True),
        ("1.5Gi", True),
        ("2G", True),
        ("1048576Ki", True),
        ("0.001Ti", True),
        ("1e9", True),
        ("511Mi", False),
        ("2Ti", False),
        ("1Pi", False),
        ("1Ei", False),
        ("9" * 32, False),
        ("9" * 33, False),
        ("0", False),
        ("-1Gi", False),
        ("1Gb", False),
        ("1gi", False),
        ("1 Gi", False),
        (" 1Gi", False),
        ("1Gi ", False),
        ("1GiB", False),
        ("lots", False),
        ("", False),
        ("\uff11Gi", False),
        ("1\u00a0Gi", False),
        ("0x40000000", False),
        ("NaN", False),
        ("Infinity", False),
        (1073741824, False),
        (1.5, False),
        (True, False),
        ({"value": "1Gi"}, False),
        (NULL, False),
        (None, False),
    ],
    "resources.storage": [
        ("1500Mi", True),
        ("2G", True),
        ("64Ti", True),
        ("999Mi", False),
        ("65Ti", False),
        ("1Ei", False),
        ("-10Gi", False),
        ("0", False),
        ("10", False),
        ("10gi", False),
        ("10 Gi", False),
        ("ten", False),
        ("", False),
        ("1" + "0" * 40 + "Gi", False),
        (10, False),
        (False, False),
        (["10Gi"], False),
        (NULL, False),
        (None, False),
    ],
    "powerState": [
        ("Running", True),
        ("Stopped", True),
        ("running", False),
        ("RUNNING", False),
        ("Paused", False),
        ("On", False),
        ("", False),
        (1, False),
        (True, False),
    ],
    "resizePolicy": [
        ("Restart", True),
        ("Deferred", True),
        ("restart", False),
        ("Later", False),
        ("Never", False),
        ("", False),
        (0, False),
    ],
    "deletionPolicy": [
        ("Delete", True),
        ("Retain", True),
        ("delete", False),
        ("Orphan", False),
        ("Snapshot", False),
        ("", False),
        (False, False),
    ],
    "healthCheckInterval": [
        ("10s", True),
        ("1h30m", True),
        ("5m0s", True),
        ("10000ms", True),
        ("9s", False),
        ("9999ms", False),
        ("25h", False),
        ("24h1s", False),
        ("0s", False),
        ("-5m", False),
        ("5", False),
        ("5 m", False),
        ("5min", False),
        ("1d", False),
        ("PT5M", False),
        ("", False),
        ("9" * 30 + "h", False),
        ("1.5h", False),
        (300, False),
        (True, False),
    ],
    "credentials.username": [
        ("orders", True),
        ("_svc", True),
        ("u" * 63, True),
        ("u" * 64, False),
        ("", False),
        ("Orders", False),
        ("1orders", False),
        ("or-ders", False),
        ("or ders", False),
        ("orders;drop", False),
        ("o'rders", False),
        ('o"rders', False),
        ("\u043erders", False),  # a Cyrillic o
        ("ord\u00e9rs", False),
        ("ord\x00ers", False),
        ("postgres", False),
        ("dbi_admin", False),
        ("pg_monitor", False),
        (7, False),
        (NULL, False),
    ],
    "credentials.database": [
        ("orders_db", True),
        ("d" * 64, False),
        ("", False),
        ("Orders-DB", False),
        ("orders db", False),
        ("postgres", False),
        ("pg_catalog", False),
        ("ord\u00e9rs", False),
        (["app"], False),
    ],
    "monitoring.enabled": [
        (False, True),
        ("false", False),
        ("yes", False),
        (0, False),
        ([], False),
    ],
}

# Accepted values with an outcome other than Ready.
NOT_READY: dict[tuple[str, Any], tuple[tuple[str, str], str]] = {
    ("resources.memory", "1Ti"): (("Ready", "Unschedulable"), "spec.resources.memory"),
    ("image", "dbi-images/postgres-99"): (("Stalled", "ImageNotFound"), "spec.image"),
    ("image", "elsewhere/postgres-18"): (("Stalled", "ImageNotAllowed"), "spec.image"),
}

# Accepted values whose convergence the corpus does not run: a Retain instance leaves
# its volume behind on the shared stack (tests/activities/steps/test_teardown_vm.py runs it).
NO_CONVERGE = {("deletionPolicy", "Retain")}

# Fields whose null the API server prunes before defaulting (the default applies).
NULL_DEFAULTS = (
    "credentials.username",
    "powerState",
    "resizePolicy",
    "deletionPolicy",
    "healthCheckInterval",
    "credentials",
    "monitoring",
    "credentials.database",
    "monitoring.enabled",
)

UNKNOWN_FIELDS = (
    "replicas",
    "password",
    "storageClassName",
    "resources.gpu",
    "resources.memoryLimit",
    "credentials.password",
    "credentials.superuser",
    "monitoring.port",
    "Version",
    "resources.CPU",
    "power_state",
    "deletion_policy",
)

# (metadata.name, accepted?)
NAMES: list[tuple[str, bool]] = [
    ("a", True),
    ("n" * names.INSTANCE_NAME_MAX, True),
    ("a-1-b", True),
    ("n" * (names.INSTANCE_NAME_MAX + 1), False),
    ("n" * 63, False),
    ("Orders", False),
    ("a.b", False),
    ("a_b", False),
    ("-a", False),
    ("a-", False),
    ("9lives", False),
    ("ord\u00e9rs", False),
    ("\u0430", False),  # a Cyrillic a
    ("a b", False),
]

# Annotations a user or tool might write: all accepted; the instance must still converge.
ANNOTATIONS: list[tuple[str, dict[str, str]]] = [
    ("paused-off", {names.PAUSED_ANNOTATION: "false"}),
    ("adopt-garbage", {names.ADOPT_ANNOTATION: "not-a-uid"}),
    ("requests-unicode", {"dbi.dev/rotate-requested-at": "\u2603 snow"}),
    ("unknown-dbi-annotation", {"dbi.dev/frobnicate": "yes"}),
    ("huge-annotation", {"example.com/blob": "x" * 100_000}),
]


def _manifest(name: str, spec: Any, **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": name, **metadata},
        "spec": spec,
    }


def _slug(value: Any) -> str:
    text = "null" if value is NULL else repr(value)
    if len(text) <= 24:
        return text
    return f"{text[:12]}...({len(value) if isinstance(value, str) else len(text)} chars)"


def _by_field() -> Iterator[Case]:
    """Each field's values; nulls the API server defaults; fields it does not know."""
    for path, values in SPEC_VALUES.items():
        for value, ok in values:
            accepted = ok or (value is NULL and path in NULL_DEFAULTS)
            yield Case(
                f"{path}={_slug(value) if value is not None else '(missing)'}",
                _manifest("", _set(BASE, path, value)),
                ACCEPT if accepted else f"spec.{path}",
                converge=not (ok and (path, value) in NO_CONVERGE),
            )
    for (path, value), (expect, named) in NOT_READY.items():
        yield Case(
            f"{path}={_slug(value)}",
            _manifest("", _set(BASE, path, value)),
            ACCEPT,
            expect=expect,
            names=named,
        )
    for path in NULL_DEFAULTS:
        if not any(v is NULL for v, _ in SPEC_VALUES.get(path, [])):
            yield Case(f"{path}=null", _manifest("", _set(BASE, path, NULL)), ACCEPT)
    for path in UNKNOWN_FIELDS:
        yield Case(f"unknown {path}", _manifest("", _set(BASE, path, 3)), f"spec.{path}")


def _shapes() -> Iterator[Case]:
    """The manifest's shape: spec and its objects missing, null, of the wrong type."""
    for shape, spec, target in (
        ("spec null", NULL, "spec"),
        ("spec a string", "version: 18", "spec"),
        ("spec a list", [BASE], "spec"),
        ("spec empty", {}, "spec.version"),
        ("resources a string", {**BASE, "resources": "1 cpu"}, "spec.resources"),
        ("resources a list", {**BASE, "resources": [BASE["resources"]]}, "spec.resources"),
        ("resources empty", {**BASE, "resources": {}}, "spec.resources.cpu"),
        ("credentials a string", {**BASE, "credentials": "app"}, "spec.credentials"),
        ("monitoring true", {**BASE, "monitoring": True}, "spec.monitoring"),
    ):
        yield Case(shape, _manifest("", None if spec is NULL else spec), target)
    missing = _manifest("", BASE)
    del missing["spec"]
    yield Case("spec missing", missing, "spec")
    yield Case("unknown top-level field", {**_manifest("", BASE), "extra": 1}, "extra")
    yield Case(
        "status written by a user", {**_manifest("", BASE), "status": {"phase": "Running"}}, ACCEPT
    )


def _metadata() -> Iterator[Case]:
    """Names, annotations and labels."""
    for instance, ok in NAMES:
        yield Case(
            f"name {_slug(instance)}", _manifest(instance, BASE), ACCEPT if ok else "metadata.name"
        )
    for label, notes in ANNOTATIONS:
        yield Case(f"annotation {label}", _manifest("", BASE, annotations=notes), ACCEPT)
    for label, labels in (
        ("label value unicode", {"team": "caf\u00e9"}),
        ("label value too long", {"team": "t" * 64}),
        ("label key bad", {"team/x/y": "a"}),
    ):
        yield Case(label, _manifest("", BASE, labels=labels), "metadata.labels")


def cases() -> Iterator[Case]:
    """Every case of the corpus; those not about the name get their own, ``c<n>``."""
    for n, case in enumerate(itertools.chain(_by_field(), _shapes(), _metadata()), start=1):
        if not case.manifest["metadata"]["name"]:
            case.manifest["metadata"]["name"] = f"c{n}"
        yield case
