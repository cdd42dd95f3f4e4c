"""Connections to an instance's PostgreSQL: short timeouts, always closed.

SQL identifiers go through ``psycopg.sql.Identifier`` and values through parameters
or ``sql.Literal``; nothing from a spec is put into SQL text.
"""

from __future__ import annotations

from typing import Any

import psycopg

from dbi.config import ADMIN_USER

PORT = 5432
CONNECT_TIMEOUT = 3


def connect(
    host: str, *, password: str, user: str = ADMIN_USER, dbname: str = "postgres"
) -> psycopg.Connection[Any]:
    """Connect with a short timeout, in autocommit (DDL such as CREATE DATABASE needs it)."""
    return psycopg.connect(
        host=host,
        port=PORT,
        user=user,
        password=password,
        dbname=dbname,
        connect_timeout=CONNECT_TIMEOUT,
        autocommit=True,
        application_name="dbi-orchestrator",
    )


def authenticates(host: str, *, user: str, password: str, dbname: str) -> bool:
    """Tell whether ``user`` can log in with ``password`` (a failed login is not an error)."""
    try:
        with connect(host, user=user, password=password, dbname=dbname):
            return True
    except psycopg.OperationalError:
        return False
