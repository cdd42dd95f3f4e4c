"""The DBDatabase resource: one PostgreSQL database on a DBInstance, declared with kubectl.

A DBDatabase names its instance (``spec.instance``, always in its own namespace: there
is no field for another), the database (``spec.name``), its owner and its extensions.
Its workflow (``workflows.objects``) runs ``dbi.pipeline.DATABASE`` while it exists and
``dbi.pipeline.DATABASE_TEARDOWN`` once it is being deleted; what proves a database
dbi's is in ``dbi.objects``. ``dbi.crd`` renders ``crds/dbdatabase.yaml`` from these
models.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from dbi import names
from dbi.fields import Section

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
Extension = Annotated[str, Field(min_length=1, max_length=63, pattern=r"^[a-z0-9_-]+$")]


class DeletionPolicy(StrEnum):
    RETAIN = "Retain"
    DELETE = "Delete"


class OnInstanceSpec(Section):
    """What every kind declared on an instance names first: the instance."""

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


class DBDatabaseSpec(OnInstanceSpec):
    """Which instance, which database, who owns it, and what happens when it goes."""

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
