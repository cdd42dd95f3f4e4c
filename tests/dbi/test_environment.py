"""dbi/environment.py is the one list of settings: the code reads no other, the docs show
them all, and a malformed value is an error that names the variable."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from dbi import environment, telemetry
from dbi.config import Config

RUNTIME_PACKAGES = ("dbi", "activities", "workflows", "watcher")


def test_the_runtime_reads_the_environment_only_through_the_table(repo_root: Path) -> None:
    """No module of the worker, watcher or CLI touches os.environ or getenv itself."""
    offenders = []
    for package in RUNTIME_PACKAGES:
        for path in sorted((repo_root / package).rglob("*.py")):
            if path in (repo_root / "dbi" / "environment.py", repo_root / "dbi" / "variable.py"):
                continue  # the table, and how one of its variables is read
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv"):
                    offenders.append(f"{path.relative_to(repo_root)}:{node.lineno}")
    assert offenders == []


def test_docs_configuration_lists_every_variable(repo_root: Path) -> None:
    text = (repo_root / "docs" / "configuration.md").read_text()
    assert environment.replace_in(text) == text, "run: python -m dbi.environment"


@pytest.mark.parametrize(
    ("name", "value", "read", "message"),
    [
        ("DBI_METRICS_PORT", "abc", telemetry.metrics_port, "must be a whole number, not 'abc'"),
        ("DBI_METRICS_PORT", "70000", telemetry.metrics_port, "at least 0 and at most 65535"),
        ("DBI_EXPORTER_PORT", "0", Config.from_env, "must be at least 1 and at most 65535"),
        ("DBI_IMAGES", "[1]", Config.from_env, "must be a JSON object of version to image"),
        ("DBI_TLS_CERT_LIFETIME", "10s", Config.from_env, "a duration of at least 30s"),
        ("DBI_TLS_CERT_LIFETIME", "90d", Config.from_env, "a duration of at least 30s"),
        ("DBI_BACKUP_STORE", "/var/backups", Config.from_env, "must be s3://<bucket>"),
        ("DBI_BACKUP_MAX_RATE", "1G", Config.from_env, "must be from 32k to 1024M"),
        ("DBI_BACKUP_MAX_RATE", "16k", Config.from_env, "must be from 32k to 1024M"),
        ("DBI_WATCH_SECONDS", "-5", lambda: environment.WATCH_SECONDS.integer(low=1), "at least 1"),
        ("DBI_LEASE_SECONDS", "soon", environment.LEASE_SECONDS.seconds, "a number of seconds"),
        ("DBI_LEASE_SECONDS", "0", environment.LEASE_SECONDS.seconds, "more than 0 seconds"),
    ],
)
def test_a_malformed_value_is_an_error_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, read: Callable[[], object], message: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"^{name} .*{re.escape(message)}"):
        read()


def test_unset_or_empty_means_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    assert environment.TEMPORAL_ADDRESS.value() == "127.0.0.1:7233"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "")
    assert environment.TEMPORAL_ADDRESS.value() == "127.0.0.1:7233"
    monkeypatch.setenv("TEMPORAL_ADDRESS", "temporal:7233")
    assert environment.TEMPORAL_ADDRESS.value() == "temporal:7233"
