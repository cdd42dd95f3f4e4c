"""Connections to an instance's PostgreSQL: verified TLS, short timeouts, always closed.

Every connection is ``sslmode=verify-full``: libpq connects to the VM's address
(``hostaddr``) and checks the server's certificate against the namespace's CA for
the Service's name (``host``), so dbi's admin password, even as SCRAM, goes to no
one but the instance (``activities.trust``).

SQL identifiers go through ``psycopg.sql.Identifier`` and values through parameters
or ``sql.Literal``; nothing from a spec is put into SQL text.

The steps of a pass log in one after the other as the same user (the admin, health and
access steps each as dbi's admin): within ``shared_sessions`` (a pass's block) one
session serves them all, as one GET serves them in ``activities.kube.shared_reads``,
until a step acts (``drop_sessions``) or the block ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from types import TracebackType
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


Key = tuple[str, str, str, str, str, str]  # server (address, name, CA), user, password, db


@dataclass
class _Sessions:
    """The sessions of one block (``shared_sessions``), by what they logged in with."""

    open: dict[Key, psycopg.Connection[Any]] = field(default_factory=dict)


# The block of sessions this thread is in; None: every ``connect`` opens its own.
_SESSIONS: ContextVar[_Sessions | None] = ContextVar("dbi_pg_sessions", default=None)


@contextmanager
def shared_sessions() -> Iterator[None]:
    """Within this block, on this thread, a ``connect`` with what an open session logged
    in with (the server, user, password and database) takes that session again instead
    of logging in anew; each is closed by ``drop_sessions`` or at the block's end, and
    at once when its ``with`` ends in an error (a failed statement, a lost server)."""
    token = _SESSIONS.set(_Sessions())
    try:
        yield
    finally:
        drop_sessions()
        _SESSIONS.reset(token)


def drop_sessions() -> None:
    """Close this block's sessions: a step acts (it may change what a login proves: a
    password, the server's certificate, the server itself), and what it and the steps
    after it see comes from new logins."""
    block = _SESSIONS.get()
    if block is None:
        return
    found, block.open = list(block.open.values()), {}
    for conn in found:
        conn.close()


class _Session(AbstractContextManager[psycopg.Connection[Any]]):
    """A block's session as ``with connect(...)`` uses it: not closed at the end of the
    ``with`` but when it ends in an error."""

    def __init__(self, block: _Sessions, key: Key, conn: psycopg.Connection[Any]) -> None:
        self._block, self._key, self._conn = block, key, conn

    def __enter__(self) -> psycopg.Connection[Any]:
        return self._conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if kind is not None or self._conn.broken:
            self._block.open.pop(self._key, None)
            self._conn.close()


def connect(
    server: Server, *, password: str, user: str = ADMIN_USER, dbname: str = "postgres"
) -> AbstractContextManager[psycopg.Connection[Any]]:
    """Connect over verified TLS with a short timeout, in autocommit (DDL such as CREATE
    DATABASE needs it); within ``shared_sessions``, take the session that logged in with
    the same again."""
    block = _SESSIONS.get()
    if block is None:
        return _open(server, password=password, user=user, dbname=dbname)
    key = (server.address, server.name, server.ca_file, user, password, dbname)
    conn = block.open.get(key)
    if conn is None or conn.closed or conn.broken:
        conn = _open(server, password=password, user=user, dbname=dbname)
        block.open[key] = conn
    return _Session(block, key, conn)


def _open(server: Server, *, password: str, user: str, dbname: str) -> psycopg.Connection[Any]:
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
