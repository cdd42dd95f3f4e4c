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
        "huge_pages",
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

    @staticmethod
    def declared(section: PostgreSQL | None) -> dict[str, str]:
        """The parameters a spec's ``postgresql`` (None: unset) declares."""
        return dict(section.parameters) if section is not None else {}

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
    """Why PostgreSQL would not take ``value`` for ``name``, or dbi would not restart
    into it (a sentence naming the field); None when both would."""
    field = f"spec.postgresql.parameters.{name}"
    if setting is None:
        return f"{field}: PostgreSQL has no such setting"
    if setting.context == "internal":
        return f"{field}: a read-only setting; PostgreSQL reports it, nobody sets it"
    if setting.context == "postmaster" and name not in RESTART_ALLOWED:
        return _restart_refused(field)
    return _typed(field, value, setting)


def _typed(field: str, value: str, setting: Setting) -> str | None:
    kind = setting.vartype
    if kind == "bool" and value.strip().lower() not in _BOOLEAN:
        return f"{field}: {value!r} is not a boolean (on or off)"
    if kind == "enum" and value.strip().lower() not in {v.lower() for v in setting.enumvals}:
        return f"{field}: {value!r} is not one of {', '.join(setting.enumvals)}"
    if kind in ("integer", "real"):
        return _numeric(field, value, setting)
    return None


# Settings that take effect at a restart (context postmaster) dbi restarts into: those
# whose cost preflight can check before (``unstartable``). A server that does not start
# takes no new value, so any other is refused before it is written.
# The restart settings the shared-memory estimate (``unstartable``) counts.
SHARED_MEMORY = (
    "shared_buffers",
    "max_connections",
    "max_prepared_transactions",
    "max_locks_per_transaction",
    "wal_buffers",
)
RESTART_ALLOWED = (*SHARED_MEMORY, "max_worker_processes", "track_activity_query_size")
MIN_CONNECTIONS = 10  # superuser_reserved_connections (3), dbi's own sessions, and some
MEMORY_SHARE = Decimal(3) / 4


def _restart_refused(field: str) -> str:
    return (
        f"{field}: takes effect at a restart, and dbi restarts only into settings it checks "
        f"first ({', '.join(RESTART_ALLOWED)})"
    )


def _pages(value: str | None, unit: str, default: Decimal) -> Decimal:
    """A declared value in units of ``unit`` (its default when not declared or not a
    number: the settings step names that)."""
    if value is None:
        return default
    number = in_base_unit(value, Setting(name="", vartype="integer", context="", unit=unit))
    return default if number is None else number


def unstartable(parameters: dict[str, str], memory: str, memory_bytes: Decimal) -> str | None:
    """Why PostgreSQL might not start with ``parameters`` in a VM of ``memory`` (pure), or
    None. Its shared memory is estimated as PostgreSQL's documentation sizes it (per
    buffer, connection, prepared transaction and lock slot) and must stay below 3/4 of
    the VM's memory; the size's own shared_buffers (1/4) is assumed where none is set."""
    get = parameters.get
    connections = _pages(get("max_connections"), "", Decimal(100))
    if connections < MIN_CONNECTIONS:
        return (
            f"spec.postgresql.parameters.max_connections: below {MIN_CONNECTIONS}; "
            "superuser_reserved_connections and dbi's own sessions need them"
        )
    buffers = _pages(get("shared_buffers"), "8kB", memory_bytes / 4 / 8192)
    wal = _pages(get("wal_buffers"), "8kB", min(buffers / 32, Decimal(2048)))
    locks = _pages(get("max_locks_per_transaction"), "", Decimal(64))
    prepared = _pages(get("max_prepared_transactions"), "", Decimal(0))
    estimate = (
        (8192 + 208) * buffers
        + (8192 + 8) * wal
        + (1800 + 270 * locks) * connections
        + (770 + 270 * locks) * prepared
        + 770 * 1024
    )
    if estimate < memory_bytes * MEMORY_SHARE:
        return None
    declared = [n for n in SHARED_MEMORY if n in parameters]
    return (
        f"spec.postgresql.parameters ({', '.join(declared)}): PostgreSQL's shared memory "
        f"would be about {estimate / 2**20:.0f} MiB, not below 3/4 of spec.resources.memory "
        f"({memory}); it might not start, and would leave its sessions no memory"
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
