"""Checking a declared PostgreSQL setting against what pg_settings says of it (plain data:
rows as PostgreSQL 18 reports them)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from dbi.parameters import Setting, owned, problem, unstartable
from tests.dbi.pg_settings import SHARED_BUFFERS, STATEMENT_TIMEOUT, WORK_MEM

JIT = Setting(name="jit", vartype="bool", context="user")
LEVEL = Setting(
    name="log_min_messages",
    vartype="enum",
    context="superuser",
    enumvals=("debug5", "debug1", "info", "notice", "warning", "error", "log", "fatal", "panic"),
)
FRACTION = Setting(
    name="autovacuum_vacuum_scale_factor",
    vartype="real",
    context="sighup",
    min_val="0",
    max_val="100",
)
PREFIX = Setting(name="log_line_prefix", vartype="string", context="sighup")
BLOCK_SIZE = Setting(
    name="block_size", vartype="integer", context="internal", min_val="8192", max_val="8192"
)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        pytest.param(WORK_MEM, "64MB", id="memory-unit"),
        pytest.param(WORK_MEM, "65536", id="bare-number-in-kB"),
        pytest.param(WORK_MEM, "1.5GB", id="fraction-with-unit"),
        pytest.param(WORK_MEM, " 8 MB ", id="spaces"),
        pytest.param(SHARED_BUFFERS, "256MB", id="unit-of-pages"),
        pytest.param(STATEMENT_TIMEOUT, "30s", id="time-unit"),
        pytest.param(STATEMENT_TIMEOUT, "1min", id="minutes"),
        pytest.param(JIT, "off", id="bool"),
        pytest.param(JIT, "TRUE", id="bool-upper"),
        pytest.param(LEVEL, "WARNING", id="enum-any-case"),
        pytest.param(FRACTION, "0.05", id="real"),
        pytest.param(PREFIX, "%m [%p] ", id="string"),
    ],
)
def test_values_postgresql_takes_pass(setting: Setting, value: str) -> None:
    assert problem(setting.name, value, setting) is None


@pytest.mark.parametrize(
    ("name", "value", "setting", "says"),
    [
        pytest.param("wrok_mem", "4MB", None, "no such setting", id="unknown"),
        pytest.param("work_mem", "4XB", WORK_MEM, "units: B, kB, MB, GB, TB", id="wrong-unit"),
        pytest.param("work_mem", "30s", WORK_MEM, "not a number", id="time-for-memory"),
        pytest.param("work_mem", "lots", WORK_MEM, "not a number", id="words"),
        pytest.param("work_mem", "32kB", WORK_MEM, "outside 64..2147483647 kB", id="below-min"),
        pytest.param("work_mem", "3TB", WORK_MEM, "outside", id="above-max"),
        pytest.param("shared_buffers", "64kB", SHARED_BUFFERS, "outside", id="below-16-pages"),
        pytest.param("statement_timeout", "-1", STATEMENT_TIMEOUT, "outside", id="negative"),
        pytest.param("statement_timeout", "5", JIT, "not a boolean", id="not-bool"),
        pytest.param("jit", "maybe", JIT, "not a boolean", id="bool-word"),
        pytest.param("log_min_messages", "loud", LEVEL, "not one of debug5", id="enum"),
        pytest.param("autovacuum_vacuum_scale_factor", "101", FRACTION, "outside", id="real"),
        pytest.param("block_size", "16384", BLOCK_SIZE, "read-only", id="internal"),
    ],
)
def test_values_postgresql_would_refuse_are_named(
    name: str, value: str, setting: Setting | None, says: str
) -> None:
    """Each refusal names the field, spec.postgresql.parameters.<name>, and why."""
    said = problem(name, value, setting)
    assert said is not None
    assert said.startswith(f"spec.postgresql.parameters.{name}: "), said
    assert says in said, said


@pytest.mark.parametrize(
    ("name", "mine"),
    [
        ("ssl", True),
        ("ssl_min_protocol_version", True),
        ("listen_addresses", True),
        ("archive_command", True),
        ("restore_command", True),
        ("log_directory", True),
        ("hba_file", True),
        ("shared_preload_libraries", True),
        ("wal_level", True),
        ("fsync", True),
        ("primary_conninfo", True),
        ("dbi.vm_cpus", True),
        ("work_mem", False),
        ("shared_buffers", False),
        ("search_path", False),
        ("log_min_duration_statement", False),
        ("auto_explain.log_min_duration", False),
    ],
)
def test_settings_dbi_owns(name: str, mine: bool) -> None:
    assert owned(name) is mine


GI = Decimal(2**30)


@pytest.mark.parametrize(
    ("declared", "fits"),
    [
        pytest.param({}, True, id="the-size's-own"),
        pytest.param({"shared_buffers": "512MB"}, True, id="half"),
        pytest.param({"shared_buffers": "768MB"}, False, id="three-quarters"),
        pytest.param({"shared_buffers": "98304"}, False, id="three-quarters-in-pages"),
        pytest.param({"shared_buffers": "1GB"}, False, id="all"),
        pytest.param({"shared_buffers": "lots"}, True, id="not-a-size"),  # settings names it
        pytest.param({"max_connections": "5000"}, True, id="many-connections"),
        pytest.param(
            {"max_connections": "2000", "max_locks_per_transaction": "1024"},
            False,
            id="lock-table",
        ),
        pytest.param({"work_mem": "4GB"}, True, id="per-operation"),
    ],
)
def test_shared_memory_must_leave_the_vm_a_quarter_of_its_memory(
    declared: dict[str, str], fits: bool
) -> None:
    said = unstartable(declared, "1Gi", GI)
    assert (said is None) is fits, said
    if not fits:
        assert said is not None and said.startswith("spec.postgresql.parameters (")
        assert "(1Gi)" in said


def test_too_few_connections_are_refused() -> None:
    said = unstartable({"max_connections": "5"}, "1Gi", GI)
    assert said is not None and "max_connections: below 10" in said


def test_a_restart_setting_dbi_cannot_check_first_is_refused() -> None:
    setting = Setting(name="max_files_per_process", vartype="integer", context="postmaster")
    said = problem("max_files_per_process", "2000", setting)
    assert said is not None and "dbi restarts only into settings it checks first" in said
    buffers = Setting(name="shared_buffers", vartype="integer", context="postmaster", unit="8kB")
    assert problem("shared_buffers", "256MB", buffers) is None
