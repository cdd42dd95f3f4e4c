"""Which addresses the worker may reach on a tenant's say-so: a backup endpoint.

A tenant names its own S3-compatible endpoint (``spec.backup.target.s3.endpoint``);
the worker connects to it from dbi's namespace, where it can reach what the tenant
cannot (the API server, Temporal, the cloud's metadata service, other tenants' VMs).
So the worker connects to a tenant's endpoint only at a public address, or at one in a
network the operator allows (``DBI_BACKUP_ALLOWED_NETWORKS``). An address given
literally is refused by the step, before any backup (``refusal``); a name is resolved
by each connection itself, which connects to an address it checked or to none
(``pool``), so that a name resolving elsewhere the second time gains nothing, and a
refused address gets no packet: a tenant learns nothing of what listens there.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import NameResolutionError, NewConnectionError
from urllib3.util import connection

from dbi.config import Network

FIELD = "spec.backup.target.s3.endpoint"
REFUSED = (
    "is not an address dbi connects to for a tenant: only public addresses, or networks "
    "the operator allows (DBI_BACKUP_ALLOWED_NETWORKS)"
)


class EndpointRefused(ValueError):
    """The endpoint's address is one the worker may not reach for a tenant."""


def allowed(address: str, networks: tuple[Network, ...]) -> bool:
    """Whether the worker may connect to ``address`` for a tenant (pure)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if any(ip in network for network in networks):
        return True
    return ip.is_global and not ip.is_multicast


def refusal(endpoint: str, networks: tuple[Network, ...]) -> str | None:
    """Why the worker may not reach ``endpoint`` for a tenant, judged without resolving
    a name: an address written literally that is not allowed, or ``localhost`` (pure);
    None: nothing known against it (a name is checked when connected)."""
    host = (urlsplit(endpoint).hostname or "").rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return f"{FIELD}: {host} {REFUSED}"
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        return None
    return None if allowed(str(literal), networks) else f"{FIELD}: {host} {REFUSED}"


def _address(host: str, port: int, networks: tuple[Network, ...]) -> str:
    """The address to connect to for ``host``: resolved here, every address it resolves
    to allowed, or ``EndpointRefused`` before any packet goes to it."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = [str(info[4][0]) for info in found]
    if not addresses or not all(allowed(a, networks) for a in addresses):
        raise EndpointRefused(f"{FIELD}: the endpoint's address {REFUSED}")
    return addresses[0]


def _connect(conn: HTTPConnection, networks: tuple[Network, ...]) -> socket.socket:
    """What urllib3's ``_new_conn`` does, to the address ``_address`` checked (TLS still
    verifies the endpoint's name: ``conn.host`` is untouched)."""
    try:
        address = _address(conn.host, conn.port or 0, networks)
    except socket.gaierror as e:
        raise NameResolutionError(conn.host, conn, e) from e
    try:
        return connection.create_connection(
            (address, conn.port or 0),
            conn.timeout,
            source_address=conn.source_address,
            socket_options=conn.socket_options,
        )
    except OSError as e:
        raise NewConnectionError(conn, f"Failed to establish a new connection: {e}") from e


def pool(networks: tuple[Network, ...], **options: Any) -> urllib3.PoolManager:
    """A urllib3 pool manager that connects only to allowed addresses: each connection
    resolves the endpoint's name itself and checks every address before it connects;
    one not allowed raises ``EndpointRefused`` (not retried), nothing sent."""

    class Checked(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, networks)

    class CheckedTLS(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, networks)

    class Pool(HTTPConnectionPool):
        ConnectionCls = Checked

    class TLSPool(HTTPSConnectionPool):
        ConnectionCls = CheckedTLS

    manager = urllib3.PoolManager(**options)
    manager.pool_classes_by_scheme = {"http": Pool, "https": TLSPool}
    return manager
