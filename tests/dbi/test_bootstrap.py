"""The cloud-init bootstrap document: written into user-data, read back (plain data)."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from dbi.bootstrap import Bootstrap, from_userdata, to_userdata

PASSWORD = "s3cret-Not-For-Logs"  # noqa: S105 (a test value)


def test_the_bootstrap_document_survives_the_round_trip_through_user_data() -> None:
    doc = Bootstrap(admin_user="dbi_admin", admin_password=SecretStr(PASSWORD), memory_bytes=1024)
    assert from_userdata(to_userdata(doc)) == doc


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
