"""The DBRole resource: one PostgreSQL role on a DBInstance, declared with kubectl.

A DBRole names its instance (in its own namespace), the role (``spec.name``), whether
it logs in, its connection limit, the roles it is a member of (``spec.inRoles``: other
DBRoles of the same instance, or predefined roles the operator allows) and where its
password comes from. dbi writes ``<object>-credentials`` with the keys of the
instance's credentials Secret. Its workflow runs ``dbi.pipeline.ROLE`` and
``ROLE_TEARDOWN``; ``dbi.crd`` renders ``crds/dbrole.yaml`` from these models.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from dbi.databases import IDENTIFIER, OnInstanceSpec

# The predefined roles a DBRole may be a member of unless the operator sets
# DBI_GRANTABLE_ROLES: none of them reads or writes the server's files or runs programs.
DEFAULT_GRANTABLE = frozenset(
    {
        "pg_read_all_data",
        "pg_write_all_data",
        "pg_read_all_settings",
        "pg_read_all_stats",
        "pg_stat_scan_tables",
        "pg_monitor",
    }
)
RoleName = Annotated[str, Field(max_length=63, pattern=IDENTIFIER)]


class DBRoleSpec(OnInstanceSpec):
    """Which instance, which role, and what it may do."""

    name: str = Field(
        pattern=IDENTIFIER,
        max_length=63,
        description="The role's name in PostgreSQL: lower-case letters, digits and '_'. "
        "Immutable; not a pg_ role, not dbi's admin, not the instance's application role.",
        json_schema_extra={
            "x-kubernetes-validations": [
                {"rule": "self == oldSelf", "message": "spec.name is immutable"}
            ]
        },
    )
    login: bool = Field(default=True, description="Whether the role may log in.")
    connection_limit: int = Field(
        default=-1, ge=-1, le=10000, description="Concurrent connections; -1: no limit."
    )
    in_roles: list[RoleName] = Field(
        default_factory=list,
        max_length=32,
        description="Roles this one is a member of: other DBRoles of the same instance, or "
        "predefined roles in the operator's list (DBI_GRANTABLE_ROLES). dbi revokes a "
        "membership of those it no longer lists.",
    )
    database: str | None = Field(
        default=None,
        pattern=IDENTIFIER,
        max_length=63,
        description="The database the credentials Secret's dbname and uri name; unset: the "
        "instance's own (spec.credentials.database).",
    )
    password_secret: str | None = Field(
        default=None,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="A Secret in this namespace whose key password is the role's password; "
        "unset: dbi generates one. Either way dbi writes <name>-credentials.",
    )


def refusal(
    spec: DBRoleSpec, *, app_role: str, admin: str, grantable: frozenset[str]
) -> tuple[str, str] | None:
    """Why the spec cannot be served on its instance, as (field, reason) or None: a
    reserved role name, or a predefined role off the operator's list."""
    if spec.name.startswith("pg_") or spec.name in (admin, app_role, "postgres"):
        return "spec.name", (
            f"{spec.name!r} is reserved: predefined roles, dbi's admin, postgres and the "
            "instance's application role (spec.credentials.username) are not DBRoles"
        )
    if spec.name in spec.in_roles:
        return "spec.inRoles", f"{spec.name!r} cannot be a member of itself"
    off = sorted(r for r in spec.in_roles if r.startswith("pg_") and r not in grantable)
    if off or admin in spec.in_roles:
        named = ", ".join([*off, *([admin] if admin in spec.in_roles else [])])
        return "spec.inRoles", f"{named} may not be granted (DBI_GRANTABLE_ROLES)"
    return None
