"""What a DBDatabase's steps read and write in its instance, as dbi's admin role.

The ledger (``dbi.databases.LEDGER_DDL``) is what proves a database dbi's: a claim row
is written before CREATE DATABASE and completed with the new database's oid after it,
so a crash between the two leaves a claim the next pass completes, never a database
nobody can tell from a foreign one. CREATE and DROP DATABASE cannot run in a
transaction; each statement here runs alone (autocommit).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from activities.infra import addresses, admin_credential, postgres, trust
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.steps.loop import Refused
from dbi.databases import LEDGER_DDL, Ledger
from dbi.pipeline import DATABASE_CREATE
from dbi.steps import Outcome

CLAIMED = "DatabaseClaimed"


@dataclass(frozen=True)
class Seen:
    """The database of a name, its ledger row and its would-be owner, as read."""

    db_oid: int | None = None
    db_owner: str | None = None
    row: Ledger | None = None
    owner_exists: bool = False
    owner_superuser: bool = False


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


def look(conn: psycopg.Connection[Any], name: str, owner: str) -> Seen:
    """Read the database ``name``, its ledger row (none while the ledger does not exist)
    and the role ``owner``."""
    db = conn.execute(
        "SELECT oid::int8, pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s", (name,)
    ).fetchone()
    role = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (owner,)).fetchone()
    row = None
    if conn.execute("SELECT to_regclass('dbi.databases') IS NOT NULL").fetchone() == (True,):
        found = conn.execute(
            "SELECT db_oid::int8, object_uid, released FROM dbi.databases WHERE name = %s",
            (name,),
        ).fetchone()
        row = None if found is None else Ledger(*found)
    return Seen(
        db_oid=None if db is None else db[0],
        db_owner=None if db is None else db[1],
        row=row,
        owner_exists=role is not None,
        owner_superuser=bool(role and role[0]),
    )


def create(conn: psycopg.Connection[Any], name: str, owner: str, uid: str) -> None:
    """Claim ``name`` for the object ``uid``, create the database, then record its oid.
    PUBLIC loses CONNECT and TEMP: only its owner (and roles granted) may connect."""
    with conn.transaction():
        # Two objects' first creates at once: CREATE ... IF NOT EXISTS is not safe
        # against a concurrent one (a unique violation in the catalog), so they take turns.
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('dbi.databases'))")
        for statement in LEDGER_DDL:
            conn.execute(statement)
        claimed = conn.execute(
            "INSERT INTO dbi.databases AS l (name, db_oid, object_uid) VALUES (%s, NULL, %s)"
            " ON CONFLICT (name) DO UPDATE SET db_oid = NULL, object_uid = EXCLUDED.object_uid,"
            " released = false WHERE l.object_uid = EXCLUDED.object_uid OR l.released",
            (name, uid),
        )
        if claimed.rowcount != 1:  # another object claimed it since the observation
            raise Refused(
                DATABASE_CREATE.result(
                    Outcome.TERMINAL,
                    CLAIMED,
                    f"spec.name: database {name} is another DBDatabase's.",
                )
            )
    ident = sql.Identifier(name)
    conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(ident, sql.Identifier(owner)))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident))
    record(conn, name, uid)


def record(conn: psycopg.Connection[Any], name: str, uid: str) -> None:
    """Make the ledger row of ``name`` the object ``uid``'s, with the database's oid
    (a claim completed, or a released database adopted)."""
    conn.execute(
        "UPDATE dbi.databases SET db_oid = (SELECT oid FROM pg_database WHERE datname = %s),"
        " object_uid = %s, released = false WHERE name = %s",
        (name, uid, name),
    )


def set_owner(conn: psycopg.Connection[Any], name: str, owner: str) -> None:
    conn.execute(
        sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(name), sql.Identifier(owner))
    )


def release(conn: psycopg.Connection[Any], name: str, uid: str) -> None:
    """Mark the object ``uid``'s database released: kept, for a new object to adopt."""
    conn.execute(
        "UPDATE dbi.databases SET released = true WHERE name = %s AND object_uid = %s", (name, uid)
    )


def drop(conn: psycopg.Connection[Any], name: str, db_oid: int, uid: str) -> None:
    """Drop the database the ledger proves the object ``uid``'s (its sessions ended
    first), then its row. The oid is checked again just before the DROP."""
    found = conn.execute(
        "SELECT 1 FROM pg_database d JOIN dbi.databases l ON l.name = d.datname"
        " WHERE d.datname = %s AND d.oid = %s AND l.db_oid = d.oid AND l.object_uid = %s",
        (name, db_oid, uid),
    ).fetchone()
    if found is not None:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
    conn.execute("DELETE FROM dbi.databases WHERE name = %s AND object_uid = %s", (name, uid))


def extensions(conn: psycopg.Connection[Any]) -> tuple[set[str], set[str]]:
    """The extensions created in the session's database, and those the server has."""
    created = {r[0] for r in conn.execute("SELECT extname FROM pg_extension")}
    available = {r[0] for r in conn.execute("SELECT name FROM pg_available_extensions")}
    return created, available


def create_extensions(conn: psycopg.Connection[Any], wanted: list[str]) -> None:
    for name in wanted:
        conn.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
