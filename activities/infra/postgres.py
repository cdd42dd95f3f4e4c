"""Connections to an instance's PostgreSQL: verified TLS, short timeouts, always closed.

Every connection is ``sslmode=verify-full``: libpq connects to the VM's address
(``hostaddr``) and checks the server's certificate against the namespace's CA for
the Service's name (``host``), so dbi's admin password, even as SCRAM, goes to no
one but the instance (``activities.infra.trust``). A guest is a tenant's machine and holds
its own certificate, so libpq also requires SCRAM-SHA-256 with channel binding
(``AUTH``): a server that asks for the password in clear or as MD5 gets nothing.

SQL identifiers go through ``psycopg.sql.Identifier`` and values through parameters
or ``sql.Literal``; nothing from a spec is put into SQL text.

The steps of a pass log in one after the other as the same user (the admin, health and
access steps each as dbi's admin): within ``shared_sessions`` (a pass's block) one
session serves them all, as one GET serves them in ``activities.infra.reads.shared_reads``,
until a step acts (``drop_sessions``) or the block ends.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
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
# How dbi authenticates to an instance, whatever its pg_hba.conf asks: SCRAM-SHA-256
# bound to the TLS channel, or nothing (libpq refuses before sending anything).
AUTH = {"require_auth": "scram-sha-256", "channel_binding": "require"}
# No statement of dbi's waits long on a lock or runs long: a user's transaction holding
# the app role, say, makes the step fail (and retry) instead of hanging it.
SESSION_OPTIONS = "-c statement_timeout=10000 -c lock_timeout=5000"
# A server that stops answering mid-session (its disk stalls, its PostgreSQL hangs)
# leaves libpq waiting for a reply with no timeout of its own: the guest's kernel
# still acknowledges, so neither TCP nor statement_timeout ends the wait. dbi cuts a
# session whose use (a ``with connect(...)``) lasts this long: above statement_timeout,
# so that the server's own error comes first, below a step's 30 s, so that the step
# reports it instead of timing out with a worker thread held for good.
ANSWER_DEADLINE_SECONDS = 20.0
# A network that vanishes (a node lost, a VM paused) acknowledges nothing: the kernel
# gives up on unacknowledged data after TCP_USER_TIMEOUT_MS and probes an idle session
# (keepalives, ``_open``) from 10 s on; for the uses with no deadline too (ANALYZE).
TCP_USER_TIMEOUT_MS = 30_000


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within the use's deadline; its session was cut."""


class Login(StrEnum):
    OK = "ok"
    REFUSED = "refused"  # the server answered: wrong password
    UNREACHABLE = "unreachable"  # no answer (booting, down, refusing connections)
    # The server asked for the password otherwise than SCRAM bound to the channel (in
    # clear, as MD5): libpq sent nothing (``AUTH``).
    INSECURE = "insecure"


# What a step says of a server that asked for a password insecurely (Login.INSECURE).
INSECURE_REASON = "InsecureAuthentication"
INSECURE_MESSAGE = (
    "PostgreSQL asked for dbi's admin password in clear or as MD5; dbi sends it only as "
    "SCRAM-SHA-256 bound to TLS, so it sent nothing. The guest's pg_hba.conf is not dbi's: "
    "a restart (dbi resize NAME --force) writes it again."
)


def login_failure(error: psycopg.OperationalError) -> Login:
    """What a failed connection says about the login (libpq reports it in the message,
    with no sqlstate): refused, asked for insecurely, or no answer."""
    said = str(error)
    if "password authentication failed" in said:
        return Login.REFUSED
    if "authentication method requirement" in said or "channel binding" in said:
        return Login.INSECURE
    return Login.UNREACHABLE


@dataclass(frozen=True)
class Server:
    """An instance's PostgreSQL as dbi reaches it (``activities.infra.trust.server``)."""

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
        _close(conn)


# Held to cut a session and to close one, so that a cut never reaches a socket that
# took a closed session's file descriptor.
_CLOSING = threading.Lock()


def _close(conn: psycopg.Connection[Any]) -> None:
    with _CLOSING:
        conn.close()


@dataclass(eq=False)
class _Use:
    """One ``with connect(...)``: cut off (``cut``) if it is still going at its deadline."""

    conn: psycopg.Connection[Any]
    fd: int
    ended: bool = False
    cut_off: bool = False

    def cut(self) -> None:
        """Shut the session's socket: libpq's wait for a reply ends in an error."""
        with _CLOSING:
            if self.ended or self.conn.closed:
                return
            try:
                with socket.socket(fileno=os.dup(self.fd)) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # not connected any more: libpq sees that by itself
                return
            self.cut_off = True

    def end(self) -> None:
        with _CLOSING:
            self.ended = True


class _Deadlines:
    """One thread that cuts the uses still going at their deadline (started on first use)."""

    def __init__(self) -> None:
        self._due: list[tuple[float, int, _Use]] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, use: _Use, seconds: float) -> None:
        with self._changed:
            heapq.heappush(self._due, (time.monotonic() + seconds, next(self._order), use))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dbi-pg-deadlines", daemon=True
                )
                self._thread.start()
            self._changed.notify()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not self._due or self._due[0][0] > time.monotonic():
                    wait = self._due[0][0] - time.monotonic() if self._due else None
                    self._changed.wait(wait)
                _, _, use = heapq.heappop(self._due)
            use.cut()


_DEADLINES = _Deadlines()


class _Session(AbstractContextManager[psycopg.Connection[Any]]):
    """A session as ``with connect(...)`` uses it: cut at its deadline; closed at the end
    of the ``with`` when it is not a block's, or when the ``with`` ends in an error."""

    def __init__(
        self,
        conn: psycopg.Connection[Any],
        *,
        address: str,
        deadline: float | None,
        block: tuple[_Sessions, Key] | None = None,
    ) -> None:
        self._conn, self._address, self._deadline, self._block = conn, address, deadline, block
        self._use: _Use | None = None

    def __enter__(self) -> psycopg.Connection[Any]:
        if self._deadline is not None:
            self._use = _Use(self._conn, self._conn.fileno())
            _DEADLINES.arm(self._use, self._deadline)
        return self._conn

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._use is not None:
            self._use.end()
        if self._block is None or kind is not None or self._conn.broken:
            if self._block is not None:
                sessions, key = self._block
                sessions.open.pop(key, None)
            _close(self._conn)
        if self._use is not None and self._use.cut_off and isinstance(error, psycopg.Error):
            raise NoAnswer(
                f"PostgreSQL at {self._address} did not answer within "
                f"{self._deadline:g} s; the session was closed"
            ) from error


def connect(
    server: Server,
    *,
    password: str,
    user: str = ADMIN_USER,
    dbname: str = "postgres",
    unbounded: bool = False,
) -> AbstractContextManager[psycopg.Connection[Any]]:
    """Connect over verified TLS with a short timeout, in autocommit (DDL such as CREATE
    DATABASE needs it); within ``shared_sessions``, take the session that logged in with
    the same again. A ``with`` still going after ``ANSWER_DEADLINE_SECONDS`` is cut off
    with ``NoAnswer``, unless ``unbounded`` (a statement meant to run long)."""
    until = None if unbounded else ANSWER_DEADLINE_SECONDS
    block = _SESSIONS.get()
    if block is None:
        own = _open(server, password=password, user=user, dbname=dbname)
        return _Session(own, address=server.address, deadline=until)
    key = (server.address, server.name, server.ca_file, user, password, dbname)
    conn = block.open.get(key)
    if conn is None or conn.closed or conn.broken:
        conn = _open(server, password=password, user=user, dbname=dbname)
        block.open[key] = conn
    return _Session(conn, address=server.address, deadline=until, block=(block, key))


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
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        keepalives_count=3,
        tcp_user_timeout=TCP_USER_TIMEOUT_MS,
        require_auth=AUTH["require_auth"],
        channel_binding=AUTH["channel_binding"],
    )


def login(server: Server, *, password: str, user: str = ADMIN_USER) -> Login:
    """Try to log in; tell a refused password from a server that does not answer."""
    if not password:
        return Login.REFUSED
    try:
        with connect(server, user=user, password=password):
            return Login.OK
    except psycopg.OperationalError as e:
        return login_failure(e)


def authenticates(server: Server, *, user: str, password: str, dbname: str) -> bool:
    """Tell whether ``user`` can log in with ``password`` (a failed login is not an error)."""
    try:
        with connect(server, user=user, password=password, dbname=dbname):
            return True
    except psycopg.OperationalError:
        return False


def major(version: str | None) -> int | None:
    """The major of a ``server_version`` such as ``16.15`` or ``18.6 (Debian ...)``."""
    head = (version or "").split(".")[0].split(" ")[0]
    return int(head) if head.isdigit() else None
