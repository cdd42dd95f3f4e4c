"""The cloud-init bootstrap document: written into user-data, read back (plain data)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from dbi import scram
from dbi.bootstrap import Bootstrap, from_userdata, to_userdata

PASSWORD = "s3cret-Not-For-Logs"  # noqa: S105 (a test value)


def test_the_bootstrap_document_survives_the_round_trip_through_user_data() -> None:
    doc = Bootstrap(
        admin_user="dbi_admin",
        admin_verifier=scram.verifier(PASSWORD),
        reset="0123abcd",
        memory_bytes=1024,
    )
    assert from_userdata(to_userdata(doc)) == doc


def test_the_user_data_carries_the_admin_passwords_verifier_never_the_password() -> None:
    """What a tenant may read (the cloud-init Secret) lets no one log in as the admin."""
    text = to_userdata(Bootstrap(admin_verifier=scram.verifier(PASSWORD)))
    assert PASSWORD not in text
    doc = from_userdata(text)
    assert doc.admin_password is None
    assert doc.admin_verifier is not None and scram.verifies(PASSWORD, doc.admin_verifier)
    assert doc.initial_password() == doc.admin_verifier


def test_a_version_1_document_with_the_password_is_still_read() -> None:
    """A guest still boots from user-data written before verifiers."""
    old = Bootstrap(version=1, admin_password=SecretStr(PASSWORD))
    assert from_userdata(to_userdata(old)).initial_password() == PASSWORD


def test_a_document_without_an_admin_credential_is_refused() -> None:
    with pytest.raises(ValueError, match="no admin credential"):
        Bootstrap()


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(f"#cloud-config\nwrite_files: [{{content: '{PASSWORD}'", id="broken-yaml"),
        pytest.param("#!/bin/sh\necho hi\n", id="not-cloud-config"),
        pytest.param("#cloud-config\nwrite_files: []\n", id="no-bootstrap-file"),
    ],
)
def test_unreadable_user_data_is_a_value_error_that_does_not_quote_it(text: str) -> None:
    """A damaged cloud-init Secret is reported as such (ValueError), without its content:
    it may hold the admin password."""
    with pytest.raises(ValueError, match="user-data") as raised:
        from_userdata(text)
    assert PASSWORD not in str(raised.value)
    assert raised.value.__cause__ is None
