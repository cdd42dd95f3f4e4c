"""The kinds users declare on an instance (DBDatabase, DBRole): what they share.

Each kind is a row of ``KINDS``: its name, its plural, its spec model and its two step
tables (``dbi.pipeline``). One workflow per object (``workflows.objects``) runs them;
the same activities load the object and write its status, whatever its kind.

dbi proves a database or a role its own by a row only its admin role can write: the
ledger ``dbi.owned`` in the instance's ``postgres`` database (``LEDGER_DDL``), keyed
by kind and name, holding the object's oid in PostgreSQL and the Kubernetes object's
UID. A database or role of that name without the row (a foreign one) is never altered
or dropped; nothing a tenant writes makes it dbi's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from dbi import names, pipeline
from dbi.databases import DBDatabaseSpec
from dbi.fields import Section
from dbi.models import Condition
from dbi.pipeline import StepSpec
from dbi.roles import DBRoleSpec
from dbi.steps import StepResult

# The ledger. Owned by the admin, in the admin's database; no other role is granted
# anything on it. ``oid`` is NULL between a claim and the CREATE it precedes.
LEDGER_DDL = (
    "CREATE SCHEMA IF NOT EXISTS dbi",
    "REVOKE ALL ON SCHEMA dbi FROM PUBLIC",
    "CREATE TABLE IF NOT EXISTS dbi.owned ("
    " kind text NOT NULL,"
    " name text NOT NULL,"
    " oid oid,"
    " object_uid text NOT NULL,"
    " released boolean NOT NULL DEFAULT false,"
    " PRIMARY KEY (kind, name))",
)


@dataclass(frozen=True)
class ObjectKind:
    """A kind users declare on an instance: its names, spec model and step tables."""

    kind: str
    plural: str
    spec: type[BaseModel]
    steps: tuple[StepSpec, ...]
    teardown: tuple[StepSpec, ...]

    def workflow_id(self, namespace: str, name: str) -> str:
        """``<kind, lower-case>/<namespace>/<name>``: ``dbdatabase/shop/reports``."""
        return f"{self.kind.lower()}/{namespace}/{name}"


DATABASES = ObjectKind(
    names.DATABASE_KIND,
    names.DATABASE_PLURAL,
    DBDatabaseSpec,
    pipeline.DATABASE,
    pipeline.DATABASE_TEARDOWN,
)
ROLES = ObjectKind(
    names.ROLE_KIND, names.ROLE_PLURAL, DBRoleSpec, pipeline.ROLE, pipeline.ROLE_TEARDOWN
)
KINDS = {k.kind: k for k in (DATABASES, ROLES)}


class ObjectStatus(Section):
    """What dbi observed: kstatus conditions and the generation they are of."""

    observed_generation: int | None = Field(
        default=None, description="The generation the last pass read."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=16,
        description="Ready, Reconciling, Stalled and one per step.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    workflow_id: str | None = Field(
        default=None, max_length=512, description="The Temporal workflow that converges it."
    )


@dataclass(frozen=True)
class Ledger:
    """The ledger's row of one name, as read."""

    oid: int | None
    object_uid: str
    released: bool


class Verdict(StrEnum):
    """Whose the database or role of an object's name is (``whose``)."""

    MISSING = "missing"  # none of that name: create it
    OURS = "ours"  # the row proves it is this object's
    ADOPT = "adopt"  # dbi's, released by a Retain teardown or left by a crash mid-create
    CLAIMED = "claimed"  # dbi's, for another object
    FOREIGN = "foreign"  # not dbi's: never altered, never dropped


def whose(oid: int | None, row: Ledger | None, uid: str) -> Verdict:
    """Decide whose the database or role named by an object (UID ``uid``) is, from its
    oid (None: none of that name) and the ledger's row for the name (None: none).

    A row whose oid is NULL is a claim made just before the CREATE: what has the name
    then is the claimant's (only the admin creates databases and roles: the instance's
    roles have neither CREATEDB nor CREATEROLE)."""
    if oid is None:
        free = row is None or row.object_uid == uid or row.released
        return Verdict.MISSING if free else Verdict.CLAIMED
    if row is None or (row.oid is not None and row.oid != oid):
        return Verdict.FOREIGN
    if row.object_uid == uid:
        return Verdict.OURS if row.oid == oid else Verdict.ADOPT
    return Verdict.ADOPT if row.released else Verdict.CLAIMED


class ObjectRef(BaseModel):
    """Which object a workflow converges: its kind, namespace, name and UID (a new
    object of the same name is another object, with another workflow run)."""

    model_config = ConfigDict(frozen=True)

    kind: str
    namespace: str
    name: str
    uid: str = ""


class Loaded(BaseModel):
    """An object as a pass's first read found it."""

    model_config = ConfigDict(frozen=True)

    exists: bool
    uid: str = ""
    generation: int = 0
    deleting: bool = False


class ObjectPass(BaseModel):
    """One pass over an object, for its status: what it read and what its steps said."""

    model_config = ConfigDict(frozen=True)

    ref: ObjectRef
    workflow_id: str
    generation: int
    deleting: bool
    results: list[StepResult]
