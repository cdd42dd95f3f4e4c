"""The bootstrap document, as the guest reads it: every version the orchestrator has
written (``dbi.bootstrap`` writes it; docs/guest.md lists the fields per version).

A document the guest cannot read is an error naming the field (``Invalid``): the boot
stops before it touches the data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The newest version the guest reads; an older one is read as it was written.
VERSION = 8
_LSN = re.compile(r"^[0-9A-F]{1,8}/[0-9A-F]{1,8}$")
_USER = re.compile(r"^[a-z_][a-z0-9_]*$")


class Invalid(ValueError):
    """A document the guest cannot act on; the message names the field."""


@dataclass(frozen=True, kw_only=True)
class Restore:
    """Where the first boot fetches the backup it starts from (version 4)."""

    backup: str
    base_url: str  # base.tar.gz: the data directory
    wal_url: str  # pg_wal.tar.gz: the WAL that makes it consistent
    # Version 6: the archived WAL to replay after it ({name: URL of name.gz}, a JSON
    # object at this URL), up to target_time (RFC 3339; None: all of it).
    archive_url: str | None = None
    target_time: str | None = None
    target_lsn: str | None = None  # version 7: up to this WAL location instead

    def __repr__(self) -> str:  # presigned URLs grant a read of the backup
        return f"Restore(backup={self.backup!r})"


@dataclass(frozen=True, kw_only=True)
class Upgrade:
    """A major upgrade a boot carries out (or rolls back), once per token (version 5)."""

    from_major: int
    to_major: int
    token: str
    action: str = "run"  # or "rollback"


@dataclass(frozen=True, kw_only=True)
class Replica:
    """The primary a replica clones and streams from (version 8; ``guest.replica``)."""

    host: str  # the name the primary's certificate carries
    hostaddr: str | None  # where to connect (None: resolve host)
    port: int
    user: str  # a role with REPLICATION
    password: str
    ca: str  # PEM: what verifies the primary's certificate
    slot: str  # the member's physical replication slot on the primary
    application_name: str  # the member's name, as pg_stat_replication shows it

    def __repr__(self) -> str:  # never the password
        return f"Replica(host={self.host!r}, slot={self.slot!r})"


@dataclass(frozen=True, kw_only=True)
class Document:
    version: int
    admin_user: str = "dbi_admin"
    # The admin password's SCRAM-SHA-256 verifier; version 1 carried the password.
    admin_verifier: str | None = None
    admin_password: str | None = None
    reset: str | None = None  # a token: set the verifier once on initialized data
    port: int = 5432
    memory_bytes: int | None = None
    server_cert: str | None = None  # version 3 on
    server_key: str | None = None
    restore: Restore | None = None
    upgrade: Upgrade | None = None
    replica: Replica | None = None

    def __repr__(self) -> str:  # never the key, the password or the verifier
        return (
            f"Document(version={self.version}, admin_user={self.admin_user!r}, "
            f"reset={self.reset is not None}, tls={self.server_cert is not None}, "
            f"restore={self.restore!r}, upgrade={self.upgrade!r}, replica={self.replica!r})"
        )

    @property
    def initial_password(self) -> str:
        """What initdb sets for the admin role: the verifier (or a version 1 password)."""
        found = self.admin_verifier or self.admin_password
        assert found is not None  # read() refuses a document without either
        return found


def read(path: Path) -> Document:
    """Read the document at ``path``; raise ``Invalid`` naming what is wrong."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise Invalid(f"no bootstrap document at {path}") from None
    except json.JSONDecodeError as e:
        raise Invalid(f"{path} is not JSON ({e.msg}, line {e.lineno})") from None
    return parse(raw)


def parse(raw: Any) -> Document:
    """Return the document ``raw`` (decoded JSON) holds; raise ``Invalid``."""
    if not isinstance(raw, dict):
        raise Invalid("the document is not a JSON object")
    version = _field(raw, "version", int, default=1)
    if not 1 <= version <= VERSION:
        raise Invalid(f"version: {version} is not one this guest reads (1 to {VERSION})")
    user = _field(raw, "admin_user", str, default="dbi_admin")
    if not _USER.match(user):
        raise Invalid(f"admin_user: {user!r} is not a role name dbi writes")
    verifier = _field(raw, "admin_verifier", str, default=None)
    if verifier is not None and not verifier.startswith("SCRAM-SHA-256$"):
        raise Invalid("admin_verifier: not a SCRAM-SHA-256 verifier")
    password = _field(raw, "admin_password", str, default=None)
    if verifier is None and password is None:
        raise Invalid("admin_verifier: the document has no admin credential")
    port = _field(raw, "port", int, default=5432)
    if not 1 <= port <= 65535:
        raise Invalid(f"port: {port} is not a TCP port")
    return Document(
        version=version,
        admin_user=user,
        admin_verifier=verifier,
        admin_password=password,
        reset=_field(raw, "reset", str, default=None),
        port=port,
        memory_bytes=_field(raw, "memory_bytes", int, default=None),
        server_cert=_field(raw, "server_cert", str, default=None),
        server_key=_field(raw, "server_key", str, default=None),
        restore=_restore(raw.get("restore")),
        upgrade=_upgrade(raw.get("upgrade")),
        replica=_replica(raw.get("replica")),
    )


def _restore(raw: Any) -> Restore | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Invalid("restore: not an object")
    return Restore(
        backup=_field(raw, "backup", str, where="restore."),
        base_url=_field(raw, "base_url", str, where="restore."),
        wal_url=_field(raw, "wal_url", str, where="restore."),
        archive_url=_field(raw, "archive_url", str, default=None, where="restore."),
        target_time=_field(raw, "target_time", str, default=None, where="restore."),
        target_lsn=_lsn(_field(raw, "target_lsn", str, default=None, where="restore.")),
    )


def _lsn(value: str | None) -> str | None:
    if value is not None and not _LSN.match(value):
        raise Invalid(f"restore.target_lsn: {value!r} is not a WAL location such as 0/3000060")
    return value


def _upgrade(raw: Any) -> Upgrade | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Invalid("upgrade: not an object")
    action = _field(raw, "action", str, default="run", where="upgrade.")
    if action not in {"run", "rollback"}:
        raise Invalid(f"upgrade.action: {action!r} is neither run nor rollback")
    return Upgrade(
        from_major=_field(raw, "from_major", int, where="upgrade."),
        to_major=_field(raw, "to_major", int, where="upgrade."),
        token=_field(raw, "token", str, where="upgrade."),
        action=action,
    )


_SLOT = re.compile(r"^[a-z0-9_]{1,63}$")


def _replica(raw: Any) -> Replica | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise Invalid("replica: not an object")
    user = _field(raw, "user", str, where="replica.")
    if not _USER.match(user):
        raise Invalid(f"replica.user: {user!r} is not a role name dbi writes")
    slot = _field(raw, "slot", str, where="replica.")
    if not _SLOT.match(slot):
        raise Invalid(f"replica.slot: {slot!r} is not a replication slot's name")
    port = _field(raw, "port", int, default=5432, where="replica.")
    if not 1 <= port <= 65535:
        raise Invalid(f"replica.port: {port} is not a TCP port")
    return Replica(
        host=_field(raw, "host", str, where="replica."),
        hostaddr=_field(raw, "hostaddr", str, default=None, where="replica."),
        port=port,
        user=user,
        password=_field(raw, "password", str, where="replica."),
        ca=_field(raw, "ca", str, where="replica."),
        slot=slot,
        application_name=_field(raw, "application_name", str, where="replica."),
    )


_REQUIRED = object()


def _field(
    raw: dict[str, Any], name: str, kind: type, *, default: Any = _REQUIRED, where: str = ""
) -> Any:
    """The field ``name`` of ``raw``, of type ``kind`` (``default`` when absent)."""
    if name not in raw or raw[name] is None:
        if default is _REQUIRED:
            raise Invalid(f"{where}{name}: missing")
        return default
    value = raw[name]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Invalid(f"{where}{name}: {type(value).__name__}, not {kind.__name__}")
    return value
