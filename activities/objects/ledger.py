"""What the steps of a DBDatabase or DBRole read and write in its instance, as dbi's
admin role: the session, and the ledger (``dbi.objects.LEDGER_DDL``).

The ledger is what proves a database or role dbi's: a claim row is written before the
CREATE and completed with the new object's oid after it, so a crash between the two
leaves a claim the next pass completes, never an object nobody can tell from a foreign
one. CREATE and DROP DATABASE cannot run in a transaction; each statement here runs
alone (autocommit) unless it says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from activities.infra import addresses, admin_credential, postgres, trust
from activities.infra.context import Context
from activities.infra.kube import Instance
from dbi.objects import LEDGER_DDL, Ledger

# Where each kind's objects are, by oid and name, in PostgreSQL's catalogs.
CATALOG = {"DBDatabase": ("pg_database", "datname"), "DBRole": ("pg_roles", "rolname")}


@contextmanager
def admin(
    ctx: Context, instance: Instance, dbname: str = "postgres"
) -> Iterator[psycopg.Connection[Any] | None]:
    """A session as dbi's admin on the instance's guest (verified TLS); None when the VM
    has no address yet."""
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None:
        yield None
        return
    home = ctx.config.namespace
    password = admin_credential.read(ctx.kube, home, instance.uid).password
    server = trust.server(ctx.kube, home, instance, address)
    with postgres.connect(server, password=password, dbname=dbname) as conn:
        yield conn


def row(conn: psycopg.Connection[Any], kind: str, name: str) -> Ledger | None:
    """The ledger's row of ``name`` (None while the ledger does not exist)."""
    if conn.execute("SELECT to_regclass('dbi.owned') IS NOT NULL").fetchone() != (True,):
        return None
    found = conn.execute(
        "SELECT oid::int8, object_uid, released FROM dbi.owned WHERE kind = %s AND name = %s",
        (kind, name),
    ).fetchone()
    return None if found is None else Ledger(*found)


def owned(conn: psycopg.Connection[Any], kind: str) -> set[str]:
    """The names of ``kind`` the ledger holds for a live object (not released)."""
    if conn.execute("SELECT to_regclass('dbi.owned') IS NOT NULL").fetchone() != (True,):
        return set()
    found = conn.execute(
        "SELECT name FROM dbi.owned WHERE kind = %s AND NOT released AND oid IS NOT NULL",
        (kind,),
    )
    return {r[0] for r in found}


def claim(conn: psycopg.Connection[Any], kind: str, name: str, uid: str) -> bool:
    """Claim ``name`` for the object ``uid`` before creating it; False when another
    object holds it (claimed since the step observed)."""
    with conn.transaction():
        # Two first claims at once: CREATE ... IF NOT EXISTS is not safe against a
        # concurrent one (a unique violation in the catalog), so they take turns.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('dbi.owned'))")
        for statement in LEDGER_DDL:
            conn.execute(statement)
        claimed = conn.execute(
            "INSERT INTO dbi.owned AS l (kind, name, oid, object_uid) VALUES (%s, %s, NULL, %s)"
            " ON CONFLICT (kind, name) DO UPDATE SET oid = NULL,"
            " object_uid = EXCLUDED.object_uid, released = false"
            " WHERE l.object_uid = EXCLUDED.object_uid OR l.released",
            (kind, name, uid),
        )
        return claimed.rowcount == 1


def record(conn: psycopg.Connection[Any], kind: str, name: str, uid: str) -> None:
    """Make the ledger row of ``name`` the object ``uid``'s, with the oid it has now (a
    claim completed, or a released object adopted)."""
    table, column = CATALOG[kind]
    conn.execute(
        f"UPDATE dbi.owned SET oid = (SELECT oid FROM {table} WHERE {column} = %s),"  # noqa: S608 (a constant)
        " object_uid = %s, released = false WHERE kind = %s AND name = %s",
        (name, uid, kind, name),
    )


def release(conn: psycopg.Connection[Any], kind: str, name: str, uid: str) -> None:
    """Mark the object ``uid``'s row released: kept, for a new object to adopt."""
    conn.execute(
        "UPDATE dbi.owned SET released = true WHERE kind = %s AND name = %s AND object_uid = %s",
        (kind, name, uid),
    )


def forget(conn: psycopg.Connection[Any], kind: str, name: str, uid: str) -> None:
    conn.execute(
        "DELETE FROM dbi.owned WHERE kind = %s AND name = %s AND object_uid = %s",
        (kind, name, uid),
    )


def proven(conn: psycopg.Connection[Any], kind: str, name: str, oid: int, uid: str) -> bool:
    """Whether the ledger proves ``name`` (now of ``oid``) the object ``uid``'s: checked
    again just before a DROP."""
    table, column = CATALOG[kind]
    found = conn.execute(
        f"SELECT 1 FROM {table} c JOIN dbi.owned l ON l.name = c.{column}"  # noqa: S608 (a constant)
        " WHERE l.kind = %s AND c.oid = %s AND l.oid = c.oid AND l.object_uid = %s"
        " AND l.name = %s",
        (kind, oid, uid, name),
    ).fetchone()
    return found is not None
