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


SALT = "eHh4eHh4eHh4eHh4eHh4eA=="  # 16 bytes


@pytest.mark.parametrize(
    "iterations",
    [
        pytest.param("0", id="below-postgresqls-minimum"),
        pytest.param("-5", id="negative"),
        pytest.param("4095", id="just-below"),
        pytest.param(str(100_000_000), id="hours-of-cpu"),
        pytest.param(str(scram.MAX_ITERATIONS + 1), id="just-above"),
    ],
)
def test_a_verifier_a_tenant_edited_to_an_odd_count_verifies_nothing_uncomputed(
    iterations: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cloud-init Secret's verifier is the tenant's to edit: a count below
    PostgreSQL's minimum raised on every pass, a huge one cost seconds of CPU on every
    pass; either verifies nothing (the step writes dbi's again) without computing keys."""
    computed: list[int] = []

    def counting(password: str, *, salt: bytes | None = None, iterations: int = 0) -> str:
        computed.append(iterations)
        return ""

    monkeypatch.setattr(scram, "verifier", counting)
    assert not scram.verifies(PASSWORD, f"SCRAM-SHA-256${iterations}:{SALT}$a:b")
    assert computed == []


def test_a_verifier_within_the_counts_dbi_accepts_still_verifies() -> None:
    stored = scram.verifier(PASSWORD, iterations=scram.MAX_ITERATIONS)
    assert scram.verifies(PASSWORD, stored)
