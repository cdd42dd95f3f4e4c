"""The DBDatabase resource: one PostgreSQL database on a DBInstance, declared with kubectl.

A DBDatabase names its instance (``spec.instance``, always in its own namespace: there
is no field for another), the database (``spec.name``), its owner and its extensions.
Its workflow (``workflows.objects``) runs ``dbi.pipeline.DATABASE`` while it exists and
``dbi.pipeline.DATABASE_TEARDOWN`` once it is being deleted. ``dbi.crd`` renders
``crds/dbdatabase.yaml`` from these models.

dbi proves a database is its own by a row only its admin role can write: the ledger,
``dbi.databases`` in the instance's ``postgres`` database (``LEDGER_DDL``), keyed by the
database's oid and holding the DBDatabase's UID. A database of that name without the row
(a foreign one) is never altered or dropped; nothing a tenant writes makes it dbi's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from dbi import names
from dbi.fields import Section
from dbi.models import Condition
from dbi.steps import StepResult

# A database or role name: PostgreSQL's own limit is 63 bytes; lower-case letters,
# digits and '_' never need quoting, so what kubectl shows is what psql takes.
IDENTIFIER = r"^[a-z_][a-z0-9_]{0,62}$"
# Databases no DBDatabase may name: PostgreSQL's own (templates, the admin's database).
RESERVED = frozenset({"postgres", "template0", "template1"})
# The extensions a DBDatabase may ask for unless the operator sets DBI_EXTENSIONS:
# ones PostgreSQL ships (contrib) that run no code of the tenant's choosing as superuser.
DEFAULT_EXTENSIONS = frozenset(
    {
        "btree_gin",
        "btree_gist",
        "citext",
        "cube",
        "fuzzystrmatch",
        "hstore",
        "intarray",
        "isn",
        "ltree",
        "pg_stat_statements",
        "pg_trgm",
        "pgcrypto",
        "tablefunc",
        "unaccent",
        "uuid-ossp",
    }
)
# The ledger: which databases dbi created for which DBDatabase. Owned by the admin, in
# the admin's database; no other role is granted anything on it.
LEDGER_DDL = (
    "CREATE SCHEMA IF NOT EXISTS dbi",
    "REVOKE ALL ON SCHEMA dbi FROM PUBLIC",
    "CREATE TABLE IF NOT EXISTS dbi.databases ("
    " name text PRIMARY KEY,"
    " db_oid oid,"  # NULL between the claim and CREATE DATABASE
    " object_uid text NOT NULL,"
    " released boolean NOT NULL DEFAULT false)",
)


Extension = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9_-]+$")]


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class DBDatabaseSpec(Section):
    """Which instance, which database, who owns it, and what happens when it goes."""

    instance: str = Field(
        min_length=1,
        max_length=names.INSTANCE_NAME_MAX,
        pattern=r"^[a-z]([-a-z0-9]*[a-z0-9])?$",
        description="Name of the DBInstance, in this namespace. Immutable.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "spec.instance is immutable"}
            ]
        },
    )
    name: str = Field(
        pattern=IDENTIFIER,
        max_length=63,
        description="The database's name in PostgreSQL: lower-case letters, digits and '_'. "
        "Immutable; not postgres, template0, template1 or the instance's own database.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "spec.name is immutable"}
            ]
        },
    )
    owner: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        max_length=63,
        description="The role that owns the database; unset: the instance's application "
        "role (spec.credentials.username). Not dbi's own roles, not a superuser.",
    )
    extensions: list[Extension] = Field(
        default_factory=list,
        max_length=32,
        description="Extensions to create in the database, from the operator's allow-list. "
        "One removed from the list stays in the database (objects may depend on it).",
    )
    deletion_policy: DeletionPolicy = Field(
        default=DeletionPolicy.RETAIN,
        description="What happens to the database when this object is deleted: Retain keeps "
        "it and its rows (a new DBDatabase of the same name adopts it); Delete drops it.",
    )


class DBDatabaseStatus(Section):
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


def workflow_id(namespace: str, name: str) -> str:
    """The id of the workflow that converges one DBDatabase."""
    return f"{names.DATABASE_WORKFLOW_PREFIX}{namespace}/{name}"


@dataclass(frozen=True)
class Ledger:
    """The ledger's row of one database name, as read."""

    db_oid: int | None
    object_uid: str
    released: bool


class Verdict(StrEnum):
    """Whose the database of a DBDatabase's name is (``whose``)."""

    MISSING = "missing"  # no database of that name: create it
    OURS = "ours"  # the row proves it is this object's
    ADOPT = "adopt"  # dbi's, released by a Retain teardown or left by a crash mid-create
    CLAIMED = "claimed"  # dbi's, for another DBDatabase
    FOREIGN = "foreign"  # not dbi's: never altered, never dropped


def whose(db_oid: int | None, row: Ledger | None, uid: str) -> Verdict:
    """Decide whose the database named by a DBDatabase (UID ``uid``) is, from its oid
    (None: no such database) and the ledger's row for the name (None: none).

    A row whose oid is NULL is a claim made just before CREATE DATABASE: a database of
    that name then is the claimant's (only the admin creates databases: the instance's
    roles have no CREATEDB)."""
    if db_oid is None:
        free = row is None or row.object_uid == uid or row.released
        return Verdict.MISSING if free else Verdict.CLAIMED
    if row is None or (row.db_oid is not None and row.db_oid != db_oid):
        return Verdict.FOREIGN
    if row.object_uid == uid:
        return Verdict.OURS if row.db_oid == db_oid else Verdict.ADOPT
    return Verdict.ADOPT if row.released else Verdict.CLAIMED


def refusal(
    spec: DBDatabaseSpec, *, own_database: str, admin: str, allowed: frozenset[str]
) -> tuple[str, str] | None:
    """Why the spec cannot be served on its instance, as (field, reason) or None: a
    reserved name or the instance's own database, an owner that is dbi's admin or a
    predefined role, an extension off the allow-list."""
    if spec.name in RESERVED or spec.name == own_database:
        return "spec.name", (
            f"{spec.name!r} is reserved: PostgreSQL's own databases and the instance's "
            "database (spec.credentials.database) are not DBDatabases"
        )
    if spec.owner is not None and (spec.owner == admin or spec.owner.startswith("pg_")):
        return "spec.owner", f"{spec.owner!r} is dbi's admin or a predefined role"
    off = sorted(set(spec.extensions) - allowed)
    if off:
        return "spec.extensions", (
            f"{', '.join(off)} not in the operator's allow-list ({', '.join(sorted(allowed))})"
        )
    return None


class ObjectRef(BaseModel):
    """Which object a workflow converges: its namespace, name and UID (a new object of
    the same name is another object, with another workflow run)."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    name: str
    uid: str = ""


class Loaded(BaseModel):
    """A DBDatabase as a pass's first read found it."""

    model_config = ConfigDict(frozen=True)

    exists: bool
    uid: str = ""
    generation: int = 0
    deleting: bool = False


class DatabasePass(BaseModel):
    """One pass over a DBDatabase, for its status: what it read and what its steps said."""

    model_config = ConfigDict(frozen=True)

    ref: ObjectRef
    workflow_id: str
    generation: int
    deleting: bool
    results: list[StepResult]
