"""PostgreSQL settings as users declare them (``spec.postgresql.parameters``), and
how a value is checked against what the running server says of the setting
(``pg_settings``) before dbi writes it with ``ALTER SYSTEM``.

Pure: the settings step (``activities/steps/settings.py``) reads ``pg_settings`` and
hands each row here as a ``Setting``. dbi owns some settings (TLS, where the server
listens, its files, what runs commands, replication and archiving): those are refused
in the CRD already, by name, and again here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated

from pydantic import AfterValidator, Field

from dbi.fields import Section, rules

# What a parameter's name may be: PostgreSQL's own, or an extension's (``auto_explain.x``).
NAME = r"^[a-z_][a-z0-9_]*([.][a-z_][a-z0-9_]*)?$"
NAME_MAX = 63
VALUE_MAX = 256
MOST = 64  # parameters an instance may set

# Settings dbi owns: exact names, then prefixes and suffixes (lower-case).
OWNED_NAMES = frozenset(
    {
        "listen_addresses",
        "port",
        "data_directory",
        "config_file",
        "hba_file",
        "ident_file",
        "external_pid_file",
        "shared_preload_libraries",
        "session_preload_libraries",
        "local_preload_libraries",
        "dynamic_library_path",
        "jit_provider",
        "password_encryption",
        "krb_server_keyfile",
        "wal_level",
        "max_wal_senders",
        "hot_standby",
        "synchronous_standby_names",
        "full_page_writes",
        "fsync",
        "data_sync_retry",
        "restart_after_crash",
        "allow_system_table_mods",
        "allow_alter_system",
        "ignore_system_indexes",
        "zero_damaged_pages",
        "ignore_checksum_failure",
        "ignore_invalid_pages",
        "cluster_name",
        "logging_collector",
        "log_destination",
        "event_source",
    }
)
OWNED_PREFIXES = ("ssl", "archive_", "recovery_", "primary_", "unix_socket_", "syslog_", "dbi.")
OWNED_SUFFIXES = ("_command", "_file", "_directory", "_filename", "_file_mode")

_OWNED_RULE = (
    "self.all(k, !(k in ["
    + ", ".join(f"'{n}'" for n in sorted(OWNED_NAMES))
    + "]) && "
    + " && ".join(f"!k.startsWith('{p}')" for p in OWNED_PREFIXES)
    + " && "
    + " && ".join(f"!k.endsWith('{s}')" for s in OWNED_SUFFIXES)
    + ")"
)
OWNED_MESSAGE = (
    "names a setting dbi owns (TLS, addresses and ports, files and directories, commands, "
    "preloaded libraries, replication, archiving, durability): see docs/user-guide.md"
)


def owned(name: str) -> bool:
    """Whether dbi owns the setting ``name`` (a user may not set it)."""
    return name in OWNED_NAMES or name.startswith(OWNED_PREFIXES) or name.endswith(OWNED_SUFFIXES)


def _names_checked(parameters: dict[str, str]) -> dict[str, str]:
    for name in parameters:
        if len(name) > NAME_MAX or not re.match(NAME, name):
            raise ValueError(f"{name!r}: {NAME_MESSAGE}")
    mine = sorted(n for n in parameters if owned(n))
    if mine:
        raise ValueError(f"{', '.join(mine)} {OWNED_MESSAGE}")
    return parameters


NAME_MESSAGE = (
    f"a parameter's name is lower-case letters, digits and _ (an extension's: "
    f"extension.name), at most {NAME_MAX} characters"
)
_NAME_RULE = f"self.all(k, size(k) <= {NAME_MAX} && k.matches('{NAME}'))"

Parameters = Annotated[
    dict[str, Annotated[str, Field(max_length=VALUE_MAX)]],
    Field(
        max_length=MOST,
        json_schema_extra=rules((_NAME_RULE, NAME_MESSAGE), (_OWNED_RULE, OWNED_MESSAGE)),
    ),
    AfterValidator(_names_checked),
]


class PostgreSQL(Section):
    """PostgreSQL's own settings."""

    parameters: Parameters = Field(
        default={},
        description="Settings written with ALTER SYSTEM, by name, each value a string as "
        "postgresql.conf takes it ('64MB', 'on', '200'). Checked against the running "
        "server's pg_settings (unknown names, wrong types or units, out of range: the "
        "condition SettingsApplied names the parameter); one that needs a restart waits "
        "for the maintenance window (or a force_resize) under resizePolicy Restart. "
        "shared_buffers, effective_cache_size, work_mem and maintenance_work_mem follow "
        "resources.memory unless set here. Settings dbi owns (ssl*, listen_addresses, "
        "port, *_file, *_command, wal_level, ...) are refused.",
    )


# Checking a value against pg_settings --------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Setting:
    """A row of ``pg_settings``: what the server takes for one setting."""

    name: str
    vartype: str  # bool, integer, real, string, enum
    context: str  # postmaster settings need a restart; internal ones cannot be set
    unit: str | None = None  # the unit of a bare number: 8kB, kB, MB, B, ms, s, min
    min_val: str | None = None
    max_val: str | None = None
    enumvals: tuple[str, ...] = ()


_MEMORY: dict[str, Decimal | int] = {
    "B": 1,
    "kB": 1024,
    "MB": 1024**2,
    "GB": 1024**3,
    "TB": 1024**4,
}
_TIME: dict[str, Decimal | int] = {
    "us": Decimal("0.001"),
    "ms": 1,
    "s": 1000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}
_BOOLEAN = {"on", "off", "true", "false", "yes", "no", "1", "0", "t", "f", "y", "n"}
_NUMBER = re.compile(
    r"^\s*(?P<n>[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?)\s*(?P<unit>[A-Za-z]+)?\s*$"
)


def _base(unit: str) -> tuple[dict[str, Decimal | int], Decimal] | None:
    """The unit family of a setting's ``unit`` (memory or time), and its size in it."""
    head = unit.lstrip("0123456789")
    count = Decimal(unit[: len(unit) - len(head)] or 1)
    for family in (_MEMORY, _TIME):
        if head in family:
            return family, count * Decimal(family[head])
    return None


def in_base_unit(value: str, setting: Setting) -> Decimal | None:
    """A numeric ``value`` as a number of the setting's own unit, or None when it is not
    a number the setting takes (a unit of another kind, or one where it has none)."""
    found = _NUMBER.match(value)
    if found is None:
        return None
    number, unit = Decimal(found["n"]), found["unit"]
    if unit is None:
        return number
    base = _base(setting.unit or "")
    if base is None or unit not in base[0]:
        return None
    return number * Decimal(base[0][unit]) / base[1]


def problem(name: str, value: str, setting: Setting | None) -> str | None:
    """Why PostgreSQL would not take ``value`` for ``name`` (a sentence naming the field),
    or None when it would."""
    field = f"spec.postgresql.parameters.{name}"
    if setting is None:
        return f"{field}: PostgreSQL has no such setting"
    if setting.context == "internal":
        return f"{field}: a read-only setting; PostgreSQL reports it, nobody sets it"
    kind = setting.vartype
    if kind == "bool" and value.strip().lower() not in _BOOLEAN:
        return f"{field}: {value!r} is not a boolean (on or off)"
    if kind == "enum" and value.strip().lower() not in {v.lower() for v in setting.enumvals}:
        return f"{field}: {value!r} is not one of {', '.join(setting.enumvals)}"
    if kind in ("integer", "real"):
        return _numeric(field, value, setting)
    return None


# What preflight checks without a server: shared_buffers is allocated when PostgreSQL
# starts, so one the VM cannot hold would keep it from starting, and then nothing could
# log in to write another value.
SHARED_BUFFERS = Setting(name="shared_buffers", vartype="integer", context="postmaster", unit="8kB")
SHARED_BUFFERS_SHARE = Decimal(3) / 4


def too_large(parameters: dict[str, str], memory: str, memory_bytes: Decimal) -> str | None:
    """Why ``parameters`` would not fit a VM of ``memory`` (pure), or None."""
    value = parameters.get(SHARED_BUFFERS.name)
    pages = in_base_unit(value, SHARED_BUFFERS) if value is not None else None
    if pages is None or pages * 8192 < memory_bytes * SHARED_BUFFERS_SHARE:
        return None
    return (
        f"spec.postgresql.parameters.shared_buffers: {value!r} is not below 3/4 of "
        f"spec.resources.memory ({memory}); PostgreSQL might not start, and would leave "
        "its sessions no memory."
    )


def _numeric(field: str, value: str, setting: Setting) -> str | None:
    number = in_base_unit(value, setting)
    if number is None:
        units = _base(setting.unit or "")
        takes = f" (units: {', '.join(units[0])})" if units else ""
        return f"{field}: {value!r} is not a number this setting takes{takes}"
    if setting.vartype == "integer":
        number = Decimal(math.floor(number + Decimal("0.5")))
    low, high = Decimal(setting.min_val or "-Infinity"), Decimal(setting.max_val or "Infinity")
    if not low <= number <= high:
        unit = f" {setting.unit}" if setting.unit else ""
        return f"{field}: {value!r} is outside {setting.min_val}..{setting.max_val}{unit}"
    return None
