"""Certificates (plain data): what a CA issues, what dbi trusts, when it renews, and the
files a guest serves them from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding
from pydantic import SecretStr

from dbi import bootstrap, tls

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NAMES = tls.service_names("team-a", "orders")
CA = tls.new_ca("team-a", NOW)


def test_a_certificate_names_the_service_and_is_trusted_with_its_key() -> None:
    pair = tls.issue(CA, NAMES, now=NOW)
    cert = x509.load_pem_x509_certificate(pair.cert_pem.encode())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "orders",
        "orders.team-a",
        "orders.team-a.svc",
        "orders.team-a.svc.cluster.local",
    ]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    verdict = tls.judge(pair.cert_pem, CA.cert_pem, NAMES, key_pem=pair.key_pem, now=NOW)
    assert verdict == tls.Verdict(
        trusted=True, renewal_due=False, not_after=NOW + tls.DEFAULT_CERT_LIFETIME
    )
    assert pair.key_pem not in repr(pair)


@pytest.mark.parametrize(
    ("lifetime", "elapsed", "due"),
    [
        (timedelta(days=90), timedelta(days=59), False),
        (timedelta(days=90), timedelta(days=61), True),
        # A short lifetime is judged on itself, not on the backdated start.
        (timedelta(seconds=60), timedelta(seconds=30), False),
        (timedelta(seconds=60), timedelta(seconds=41), True),
    ],
)
def test_renewal_is_due_with_a_third_of_the_lifetime_left(
    lifetime: timedelta, elapsed: timedelta, due: bool
) -> None:
    pair = tls.issue(CA, NAMES, lifetime=lifetime, now=NOW)
    verdict = tls.judge(pair.cert_pem, CA.cert_pem, NAMES, now=NOW + elapsed)
    assert (verdict.trusted, verdict.renewal_due) == (True, due)


def test_what_is_not_trusted() -> None:
    pair = tls.issue(CA, NAMES, lifetime=timedelta(days=1), now=NOW)
    other_ca = tls.new_ca("team-b", NOW)
    other_key = tls.issue(CA, NAMES, now=NOW).key_pem
    untrusted = {
        "another CA": tls.judge(pair.cert_pem, other_ca.cert_pem, NAMES, now=NOW),
        "another instance": tls.judge(
            pair.cert_pem, CA.cert_pem, tls.service_names("team-a", "billing"), now=NOW
        ),
        "expired": tls.judge(pair.cert_pem, CA.cert_pem, NAMES, now=NOW + timedelta(days=2)),
        "not its key": tls.judge(pair.cert_pem, CA.cert_pem, NAMES, key_pem=other_key, now=NOW),
        "garbage": tls.judge("not a certificate", CA.cert_pem, NAMES, now=NOW),
        "none": tls.judge(None, CA.cert_pem, NAMES, now=NOW),
        "no CA": tls.judge(pair.cert_pem, "", NAMES, now=NOW),
    }
    assert [why for why, verdict in untrusted.items() if verdict.trusted] == []


def test_the_served_der_is_judged_as_the_pem() -> None:
    pair = tls.issue(CA, NAMES, now=NOW)
    der = x509.load_pem_x509_certificate(pair.cert_pem.encode()).public_bytes(Encoding.DER)
    assert tls.fingerprint(der) == tls.fingerprint(pair.cert_pem)
    assert tls.judge(der, CA.cert_pem, NAMES, now=NOW).trusted


def test_a_renewal_writes_the_slot_not_in_use_and_points_the_settings_there() -> None:
    pair = tls.issue(CA, NAMES, now=NOW)
    at_boot = bootstrap.tls_files(pair.cert_pem, pair.key_pem)
    assert list(at_boot) == ["dbi-server-a.crt", "dbi-server-a.key", bootstrap.TLS_CONF]
    assert "ssl_key_file = 'dbi-server-a.key'" in at_boot[bootstrap.TLS_CONF]
    slot = bootstrap.other_slot("/var/lib/pgsql/data/dbi-server-a.key")
    renewal = bootstrap.tls_files(pair.cert_pem, pair.key_pem, slot)
    assert list(renewal)[-1] == bootstrap.TLS_CONF  # the settings last
    assert "ssl_key_file = 'dbi-server-b.key'" in renewal[bootstrap.TLS_CONF]
    assert bootstrap.other_slot("dbi-server-b.key") == "a"
    assert bootstrap.other_slot("server.key") == "a"  # a guest without slots yet


def test_the_boot_data_carries_the_key_and_hides_it() -> None:
    pair = tls.issue(CA, NAMES, now=NOW)
    doc = bootstrap.Bootstrap(
        admin_verifier="SCRAM-SHA-256$4096:c2FsdA==$a:b",
        server_cert=pair.cert_pem,
        server_key=SecretStr(pair.key_pem),
    )
    assert pair.key_pem not in repr(doc)
    back = bootstrap.from_userdata(bootstrap.to_userdata(doc))
    assert back.server_key is not None
    assert back.server_key.get_secret_value() == pair.key_pem
    assert back.server_cert == pair.cert_pem
