"""Rows of pg_settings as PostgreSQL 18 reports them, for the tests of dbi.parameters
and of the settings step (plain data)."""

from __future__ import annotations

from dbi.parameters import Setting

WORK_MEM = Setting(
    name="work_mem",
    vartype="integer",
    context="user",
    unit="kB",
    min_val="64",
    max_val="2147483647",
)
SHARED_BUFFERS = Setting(
    name="shared_buffers",
    vartype="integer",
    context="postmaster",
    unit="8kB",
    min_val="16",
    max_val="1073741823",
)
STATEMENT_TIMEOUT = Setting(
    name="statement_timeout",
    vartype="integer",
    context="user",
    unit="ms",
    min_val="0",
    max_val="2147483647",
)
