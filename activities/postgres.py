"""Connections to an instance's PostgreSQL: verified TLS, short timeouts, always closed.

Every connection is ``sslmode=verify-full``: libpq connects to the VM's address
(``hostaddr``) and checks the server's certificate against the namespace's CA for
the Service's name (``host``), so dbi's admin password, even as SCRAM, goes to no
one but the instance (``activities.trust``).

SQL identifiers go through ``psycopg.sql.Identifier`` and values through parameters
or ``sql.Literal``; nothing from a spec is put into SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import psycopg

from dbi.config import ADMIN_USER

PORT = 5432
CONNECT_TIMEOUT_SECONDS = 3
# No statement of dbi's waits long on a lock or runs long: a user's transaction holding
# the app role, say, makes the step fail (and retry) instead of hanging it.
SESSION_OPTIONS = "-c statement_timeout=10000 -c lock_timeout=5000"


class Login(StrEnum):
    OK = "ok"
    REFUSED = "refused"  # the server answered: wrong password
    UNREACHABLE = "unreachable"  # no answer (booting, down, refusing connections)


@dataclass(frozen=True)
class Server:
    """An instance's PostgreSQL as dbi reaches it (``activities.trust.server``)."""

    address: str  # the VM's: where to connect
    name: str  # the Service's DNS name: what its certificate must carry
    ca_file: str  # the namespace's CA, as a file (empty: none, nothing verifies)


def connect(
    server: Server, *, password: str, user: str = ADMIN_USER, dbname: str = "postgres"
) -> psycopg.Connection[Any]:
    """Connect over verified TLS with a short timeout, in autocommit (DDL such as CREATE
    DATABASE needs it)."""
    return psycopg.connect(
        host=server.name,
        hostaddr=server.address,
        sslmode="verify-full",
        sslrootcert=server.ca_file or "/nonexistent/dbi-no-ca.crt",
        port=PORT,
        user=user,
        password=password,
        dbname=dbname,
        connect_timeout=CONNECT_TIMEOUT_SECONDS,
        autocommit=True,
        application_name="dbi-orchestrator",
        options=SESSION_OPTIONS,
    )


def login(server: Server, *, password: str, user: str = ADMIN_USER) -> Login:
    """Try to log in; tell a refused password from a server that does not answer."""
    if not password:
        return Login.REFUSED
    try:
        with connect(server, user=user, password=password):
            return Login.OK
    except psycopg.OperationalError as e:
        # The server answered and said no (libpq reports it in the message, no sqlstate).
        return Login.REFUSED if "password authentication failed" in str(e) else Login.UNREACHABLE


def authenticates(server: Server, *, user: str, password: str, dbname: str) -> bool:
    """Tell whether ``user`` can log in with ``password`` (a failed login is not an error)."""
    try:
        with connect(server, user=user, password=password, dbname=dbname):
            return True
    except psycopg.OperationalError:
        return False
