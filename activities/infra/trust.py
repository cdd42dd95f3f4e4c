"""The namespace CAs, and what the guest serves: how dbi trusts an instance's PostgreSQL.

Each tenant namespace has one CA, in a Secret of the orchestrator's namespace
(``dbi-ca-<namespace>``, keys ``tls.crt`` and ``tls.key``), where tenants cannot read
its key, recording the namespace's UID: a namespace deleted and created again under
the same name (perhaps for another tenant) gets a CA of its own, never the old one;
the credentials step creates it (``create_ca``: a create, so that two
instances of a namespace racing to make it keep the first) and signs each instance's
server certificate with it (``dbi.tls``). dbi's own connections to an instance
verify the certificate against that CA for the Service's name while connecting to
the VM's address (``server``: libpq's ``host`` and ``hostaddr``). ``served`` reads
the certificate a server presents, without logging in.

The credentials step reads the CA at the start of every pass but an idle one
(``read_ca``); the steps after it that only need its certificate, and an idle pass's
credentials step, take the read this process made when it is under a minute old
(``recent_ca``), as a controller's steps share one read of an object: at most one GET
of the CA per pass, not one per step, and about one a minute for all the idle
instances of a namespace.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
import ssl
import struct
import tempfile
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from kubernetes import client as k8s

from activities.infra import postgres
from activities.infra.kube import Instance, Kube, or_none
from dbi import names, tls

CA_PREFIX = "dbi-ca-"
# On a CA Secret: the UID of the namespace it was made for.
NAMESPACE_UID_ANNOTATION = "dbi.dev/namespace-uid"
_TRUST_DIR = Path(tempfile.gettempdir()) / f"dbi-trust-{os.getuid()}"
_SSL_REQUEST = struct.pack("!ii", 8, 80877103)  # PostgreSQL's SSLRequest message


# How long a CA read is taken again by later steps in this process (``recent_ca``).
RECENT_SECONDS = 60.0
_recent: dict[tuple[str, str], tuple[float, tls.KeyPair]] = {}
_recent_lock = threading.Lock()


def ca_name(namespace: str) -> str:
    """The name of the CA Secret of a tenant namespace (in the orchestrator's)."""
    return f"{CA_PREFIX}{namespace}"


def read_ca(kube: Kube, home: str, namespace: str) -> tls.KeyPair | None:
    """The CA of ``namespace``'s instances, or None when it has none (yet), or has one
    made for another namespace of that name (deleted and created again since: its UID
    differs, and the new namespace's tenant gets a CA of its own)."""
    found = kube.secret(home, ca_name(namespace))
    data = (found.data or {}) if found is not None else {}
    if data and not _of_this_namespace(kube, found, namespace):
        data = {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        with _recent_lock:
            _recent.pop((home, namespace), None)
        return None
    ca = tls.KeyPair(
        base64.b64decode(data["tls.crt"]).decode(), base64.b64decode(data["tls.key"]).decode()
    )
    with _recent_lock:
        _recent[(home, namespace)] = (time.monotonic(), ca)
    return ca


def recent_ca(kube: Kube, home: str, namespace: str) -> tls.KeyPair | None:
    """``read_ca``, or the read this process made in the last ``RECENT_SECONDS`` (the
    credentials step's, earlier in the pass). A CA replaced meanwhile by another worker
    is seen here within that time; until then a connection fails to verify and the
    step retries, never trusting less."""
    with _recent_lock:
        found = _recent.get((home, namespace))
    if found is not None and time.monotonic() - found[0] < RECENT_SECONDS:
        return found[1]
    return read_ca(kube, home, namespace)


def namespace_uid(kube: Kube, namespace: str) -> str | None:
    """The UID of the namespace of that name now (None: there is none)."""
    found = or_none(lambda: kube.core.read_namespace(namespace))
    return found.metadata.uid if found is not None and found.metadata is not None else None


def _of_this_namespace(kube: Kube, secret: k8s.V1Secret | None, namespace: str) -> bool:
    """Whether a CA Secret was made for the namespace of that name that exists now (one
    made before CAs recorded it is taken to be)."""
    annotations = (secret.metadata.annotations if secret and secret.metadata else None) or {}
    recorded = annotations.get(NAMESPACE_UID_ANNOTATION)
    return recorded is None or recorded == namespace_uid(kube, namespace)


def create_ca(kube: Kube, home: str, namespace: str) -> None:
    """Create ``namespace``'s CA, recording the namespace's UID; one made meanwhile by
    another instance's step stays, one made for a namespace of that name deleted since
    is replaced (deleted naming its UID, then made anew)."""
    uid = namespace_uid(kube, namespace)
    ca = tls.new_ca(namespace)
    body = k8s.V1Secret(
        metadata=k8s.V1ObjectMeta(
            name=ca_name(namespace),
            namespace=home,
            labels={"app.kubernetes.io/managed-by": "dbi", "dbi.dev/ca-for": namespace},
            annotations={NAMESPACE_UID_ANNOTATION: uid} if uid else None,
        ),
        type="kubernetes.io/tls",
        string_data={"tls.crt": ca.cert_pem, "tls.key": ca.key_pem},
    )
    for _ in range(2):
        try:
            kube.core.create_namespaced_secret(home, body, field_manager=names.FIELD_MANAGER)
            return
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        found = kube.secret(home, ca_name(namespace))
        if found is None or _of_this_namespace(kube, found, namespace):
            return  # another step made this namespace's meanwhile (or it just went)
        _delete_stale(kube, home, namespace, found)


def _delete_stale(kube: Kube, home: str, namespace: str, found: k8s.V1Secret) -> None:
    """Delete the CA Secret ``found`` (made for a namespace of that name gone since),
    naming its UID: only that one goes."""
    uid = found.metadata.uid if found.metadata is not None else None
    stale = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid))
    or_none(lambda: kube.core.delete_namespaced_secret(ca_name(namespace), home, body=stale))


def trust_file(ca_pem: str) -> str:
    """A file holding ``ca_pem`` (libpq's ``sslrootcert`` takes a path), written once."""
    path = _TRUST_DIR / f"{hashlib.sha256(ca_pem.encode()).hexdigest()[:32]}.crt"
    if not path.exists():
        _TRUST_DIR.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=_TRUST_DIR)
        with os.fdopen(fd, "w") as f:
            f.write(ca_pem)
        os.replace(tmp, path)
    return str(path)


def server(kube: Kube, home: str, instance: Instance, address: str) -> postgres.Server:
    """How dbi reaches ``instance``'s PostgreSQL at ``address``: verified against its
    namespace's CA for its Service's name. With no CA (deleted), nothing verifies."""
    return reach(instance, address, recent_ca(kube, home, instance.namespace))


def reach(instance: Instance, address: str, ca: tls.KeyPair | None) -> postgres.Server:
    """``server``, with the namespace's CA as read."""
    return postgres.Server(
        address=address,
        name=names.service_host(instance.namespace, instance.name),
        ca_file=trust_file(ca.cert_pem) if ca is not None else "",
    )


class Serves(StrEnum):
    CERTIFICATE = "certificate"
    NO_TLS = "no-tls"  # the server answers SSLRequest with N: it has TLS off
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Served:
    """What a server presents to a client asking for TLS."""

    serves: Serves
    der: bytes | None = None


def served(address: str, port: int = postgres.PORT) -> Served:
    """Ask the server at ``address`` for TLS and read its certificate, without verifying
    it or logging in (PostgreSQL logs nothing for a connection closed before its
    startup packet)."""
    try:
        with socket.create_connection((address, port), postgres.CONNECT_TIMEOUT_SECONDS) as raw:
            raw.sendall(_SSL_REQUEST)
            if raw.recv(1) != b"S":
                return Served(Serves.NO_TLS)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # judged against the CA by dbi.tls
            with context.wrap_socket(raw) as wrapped:
                der = wrapped.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError):
        return Served(Serves.UNREACHABLE)
    return Served(Serves.CERTIFICATE, der) if der else Served(Serves.UNREACHABLE)
