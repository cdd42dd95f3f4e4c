"""Certificates: a CA per tenant namespace, a server certificate per instance (pure).

dbi keeps one CA per namespace it serves (its key in the orchestrator's namespace,
``activities.steps.tls``) and signs each instance a server certificate for its Service's
names (``<name>``, ``<name>.<ns>``, ``<name>.<ns>.svc``, ``<name>.<ns>.svc.cluster.local``).
The certificate and its key reach the guest in the boot data (``dbi.bootstrap``);
clients verify it with the CA (``ca.crt`` in the credentials Secret) and
``sslmode=verify-full``. Keys are ECDSA P-256. A certificate is renewed once less
than a third of its lifetime is left (cert-manager's default).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_LIFETIME = timedelta(days=3650)
DEFAULT_CERT_LIFETIME = timedelta(days=90)
# Issued a little in the past, so a guest whose clock lags accepts it.
BACKDATE = timedelta(minutes=5)
RENEW_WHEN_LEFT = 1 / 3


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM (the key never in a repr)."""

    cert_pem: str
    key_pem: str

    def __repr__(self) -> str:
        return f"KeyPair(fingerprint={fingerprint(self.cert_pem)!r})"


def service_names(namespace: str, name: str) -> list[str]:
    """The DNS names an instance's certificate carries: its Service's, short to full."""
    return [
        name,
        f"{name}.{namespace}",
        f"{name}.{namespace}.svc",
        f"{name}.{namespace}.svc.cluster.local",
    ]


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def new_ca(namespace: str, now: datetime | None = None) -> KeyPair:
    """Return a new CA for ``namespace``'s instances."""
    now = now or datetime.now(UTC)
    key = _key()
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dbi"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"dbi CA for namespace {namespace}"[:64]),
        ]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + CA_LIFETIME)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def issue(
    ca: KeyPair,
    names: list[str],
    *,
    lifetime: timedelta = DEFAULT_CERT_LIFETIME,
    now: datetime | None = None,
) -> KeyPair:
    """Return a new server key and a certificate for ``names``, signed by ``ca``."""
    now = now or datetime.now(UTC)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca.key_pem.encode(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = _key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[-1][:64])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(_cert_pem(cert), _key_pem(key))


def fingerprint(cert_pem_or_der: str | bytes) -> str:
    """The SHA-256 of a certificate's DER, hex (what the guest names its files after)."""
    der = (
        cert_pem_or_der
        if isinstance(cert_pem_or_der, bytes)
        else x509.load_pem_x509_certificate(cert_pem_or_der.encode()).public_bytes(
            serialization.Encoding.DER
        )
    )
    return hashlib.sha256(der).hexdigest()


def issued_at(cert_pem: str) -> datetime:
    """When a certificate dbi issued was made (``issue`` backdates its start)."""
    return x509.load_pem_x509_certificate(cert_pem.encode()).not_valid_before_utc + BACKDATE


@dataclass(frozen=True)
class Verdict:
    """What a server certificate is worth against a CA and the names it must carry."""

    trusted: bool  # signed by the CA, for the names, within its validity period
    renewal_due: bool  # trusted, but less than a third of its lifetime left
    not_after: datetime | None = None


UNTRUSTED = Verdict(trusted=False, renewal_due=False)


def judge(
    cert: str | bytes | None,
    ca_pem: str,
    names: list[str],
    *,
    key_pem: str | None = None,
    now: datetime | None = None,
) -> Verdict:
    """Judge a certificate (PEM, DER or None): trusted by ``ca_pem`` for ``names`` now,
    and whether its renewal is due; with ``key_pem``, the key must be its key."""
    if not cert or not ca_pem:
        return UNTRUSTED
    now = now or datetime.now(UTC)
    try:
        parsed = (
            x509.load_der_x509_certificate(cert)
            if isinstance(cert, bytes)
            else x509.load_pem_x509_certificate(cert.encode())
        )
        ca_cert = x509.load_pem_x509_certificate(ca_pem.encode())
        parsed.verify_directly_issued_by(ca_cert)
        san = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        if key_pem is not None:
            key = serialization.load_pem_private_key(key_pem.encode(), password=None)
            if key.public_key() != parsed.public_key():
                return UNTRUSTED
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return UNTRUSTED
    start, end = parsed.not_valid_before_utc, parsed.not_valid_after_utc
    if not (start <= now < end) or not set(names) <= set(san.get_values_for_type(x509.DNSName)):
        return Verdict(trusted=False, renewal_due=False, not_after=end)
    due = end - now < (end - (start + BACKDATE)) * RENEW_WHEN_LEFT  # of the lifetime asked
    return Verdict(trusted=True, renewal_due=due, not_after=end)
