"""Connecting as an application does: the credentials Secret's ``uri`` (which asks for
``sslmode=verify-full``) with the Secret's ``ca.crt`` as the root certificate."""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote

from activities.infra.trust import trust_file


def with_ca(uri: str, ca_pem: str) -> str:
    """``uri`` with ``sslrootcert`` naming a file that holds ``ca_pem``."""
    return f"{uri}&sslrootcert={quote(trust_file(ca_pem), safe='')}"


def conninfo(data: Mapping[str, str]) -> str:
    """The Secret's ``uri`` as an app mounting the Secret uses it (PGSSLROOTCERT)."""
    return with_ca(data["uri"], data["ca.crt"])
