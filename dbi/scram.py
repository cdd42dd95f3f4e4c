"""SCRAM-SHA-256 verifiers: what PostgreSQL stores for a password, computed by dbi.

A role's password reaches PostgreSQL only as a verifier (``CREATE ROLE``, ``ALTER
ROLE`` and the first boot's bootstrap document carry it; PostgreSQL stores a value
already in this form as it is), so neither the wire, nor the server's log of a failed
statement, nor a tenant who reads the cloud-init Secret ever sees the password.
``scramp`` (pg8000's SCRAM library) computes the keys; the format is PostgreSQL's:
``SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>``, base64.
"""

from __future__ import annotations

import base64
import hmac

from scramp import ScramException, ScramMechanism

ITERATIONS = 4096  # PostgreSQL's scram_iterations default
_MECHANISM = ScramMechanism("SCRAM-SHA-256")


def verifier(password: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """Return the SCRAM-SHA-256 verifier of ``password`` (a new random salt unless given)."""
    salt, stored, server, iterations = _MECHANISM.make_auth_info(
        password, iteration_count=iterations, salt=salt
    )
    salt_, stored_, server_ = (base64.b64encode(b).decode() for b in (salt, stored, server))
    return f"SCRAM-SHA-256${iterations}:{salt_}${stored_}:{server_}"


# The iteration counts a verifier dbi checks may have: dbi writes ITERATIONS; one a
# tenant edited into the cloud-init Secret with a huge count would cost the worker
# seconds of CPU on every pass, and one below PostgreSQL's minimum would not compute.
MAX_ITERATIONS = 16 * ITERATIONS


def verifies(password: str, stored_verifier: str) -> bool:
    """Tell whether ``stored_verifier`` is the verifier of ``password`` (its own salt and
    iterations); a malformed verifier, or one with an iteration count outside
    ``ITERATIONS`` to ``MAX_ITERATIONS``, verifies nothing (and costs nothing)."""
    try:
        head, _keys = stored_verifier.removeprefix("SCRAM-SHA-256$").split("$", 1)
        iterations, salt = head.split(":", 1)
        if not ITERATIONS <= int(iterations) <= MAX_ITERATIONS:
            return False
        expected = verifier(password, salt=base64.b64decode(salt), iterations=int(iterations))
    except (ValueError, ScramException):
        return False
    return hmac.compare_digest(expected.encode(), stored_verifier.encode())
