"""SCRAM-SHA-256 verifiers as PostgreSQL stores them (plain data)."""

from __future__ import annotations

import pytest

from dbi import scram

PASSWORD = "a-test-password"  # noqa: S105 (a test value)


def test_a_verifier_verifies_its_password_and_no_other() -> None:
    """The verifier is PostgreSQL's format, salted anew each time, and checks the password."""
    first, second = scram.verifier(PASSWORD), scram.verifier(PASSWORD)
    assert first.startswith("SCRAM-SHA-256$4096:") and first != second
    assert PASSWORD not in first
    assert scram.verifies(PASSWORD, first) and scram.verifies(PASSWORD, second)
    assert not scram.verifies("another-password", first)


@pytest.mark.parametrize("stored", ["", "garbage", "SCRAM-SHA-256$x:y$z", "md5abc"])
def test_a_malformed_verifier_verifies_nothing(stored: str) -> None:
    assert not scram.verifies(PASSWORD, stored)
