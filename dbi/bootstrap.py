"""The first-boot document a DBInstance's VM receives through cloud-init.

The orchestrator writes it into the VM's cloud-init user-data Secret as a
``#cloud-config`` that drops ``/etc/dbi/bootstrap.json`` (mode 0600) and runs
``dbi-bootstrap`` at every boot: the guest program (``guest``, docs/guest.md), which
reads the document from the seed disk (cloud-init's copy is missing or stale there),
which initializes PostgreSQL once, with the admin role and its password's SCRAM
verifier (the document, in a Secret of the tenant's namespace, never holds the
password), and configures it to listen; the local stack's VM stand-in runs the same
program on the same document. Later boots find an initialized data directory and leave it alone, but
for one thing: a ``reset`` token the data directory has not seen yet sets the admin
role's password to the document's verifier (the orchestrator's break-glass recovery
of a lost admin credential), once.

The document also carries the instance's TLS server certificate and key
(``dbi.tls``): every boot installs them (``tls_files``), turns ``ssl`` on and writes
``pg_hba.conf`` (``PG_HBA``): TLS with SCRAM-SHA-256 only, plaintext refused. A renewed
certificate reaches a running server the same way, written by the orchestrator over
a verified connection (``activities.tls_step``), and is in the document for later
boots.

An instance restored from a backup (``spec.restore``, version 4) gets ``restore``: where
to fetch the backup's two tarballs (a presigned HTTPS URL of an S3 store, or a
``file://`` path the guest can read). The first boot unpacks them as the data
directory instead of running initdb (PostgreSQL replays the backup's WAL when it
starts), then sets the admin role's password to the document's verifier, as a reset
does; later boots ignore it.

A major upgrade (version 5) gets ``upgrade``: a boot on a root disk of major ``to``
whose data is of major ``from`` runs ``pg_upgrade`` (data not shut down cleanly is
first recovered by a single-user server of major ``from``; ``--check``; then a copy
into a new data directory, the old one kept, as ``delete_old_cluster.sh`` of the
upgrade's working directory can remove it) and boots the new data; if the check or the
upgrade fails it boots the old data with the old major's binaries (an image of a major
carries the previous majors' binaries for this) and leaves the new directory out.
Either way it writes ``dbi-upgrade.json`` (the token, ``ok``, the phase that failed and
pg_upgrade's last lines) into the data directory it boots, where the orchestrator reads
it over SQL. ``action: rollback`` makes a boot go back to the old data directory, if
it is still there, and drop the new one.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from dbi import tls
from guest import files

PATH = files.DOCUMENT
COMMAND = files.COMMAND
USERDATA_KEY = "userdata"


class Restore(BaseModel):
    """Where the first boot fetches the backup it starts from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    backup: str = Field(description="The DBBackup's name, for the guest's log.")
    # Presigned URLs grant a read of the backup: never in a repr.
    base_url: str = Field(description="base.tar.gz: the data directory.", repr=False)
    wal_url: str = Field(description="pg_wal.tar.gz: the WAL that makes it consistent.", repr=False)
    # Point-in-time recovery (version 6): the archived WAL to replay after the backup's.
    archive_url: str | None = Field(
        default=None,
        description="A JSON object: each archived WAL file the restore replays (name, "
        "without .gz) and the URL of its gzipped copy.",
        repr=False,
    )
    target_time: str | None = Field(
        default=None, description="recovery_target_time (RFC 3339); None: all the WAL given."
    )
    # Version 7: a WAL location instead of a time.
    target_lsn: str | None = Field(
        default=None, description="recovery_target_lsn, such as 0/3000060 (instead of a time)."
    )


class Upgrade(BaseModel):
    """A major upgrade a boot carries out (or rolls back), once per token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    from_major: int = Field(ge=10, le=99, description="The data's major before.")
    to_major: int = Field(ge=10, le=99, description="The major of the root disk's binaries.")
    token: str = Field(max_length=200, description="Which upgrade: the guest's report names it.")
    action: Literal["run", "rollback"] = "run"


class Replica(BaseModel):
    """The primary a replica member clones and streams from (version 8)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(description="The primary's Service, as its certificate names it.")
    hostaddr: str | None = Field(default=None, description="Where to connect to it.")
    port: int = Field(default=5432, ge=1, le=65535)
    user: str = Field(pattern=r"^[a-z_][a-z0-9_]*$", description="A role with REPLICATION.")
    password: SecretStr
    ca: str = Field(description="PEM: the CA that verifies the primary's certificate.")
    slot: str = Field(pattern=r"^[a-z0-9_]{1,63}$", description="The member's slot.")
    application_name: str = Field(description="The member's name.")


# Where a boot reports an upgrade, in the data directory it boots; the orchestrator
# reads it with pg_read_file as the admin.
UPGRADE_REPORT = files.UPGRADE_REPORT
# pg_upgrade writes this into its working directory, the data directory's parent: it
# removes the old data directory (the upgrade's point of no return).
DELETE_OLD_CLUSTER = files.DELETE_OLD_CLUSTER


class Bootstrap(BaseModel):
    """What the first boot needs: the admin role, its password's verifier, and where to
    listen; and what a later boot acts on: a reset of the admin password."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(default=5, description="Document format version.")
    admin_user: str = Field(default="dbi_admin", pattern=r"^[a-z_][a-z0-9_]*$")
    admin_verifier: str | None = Field(
        default=None,
        pattern=r"^SCRAM-SHA-256\$",
        description="The admin password's SCRAM-SHA-256 verifier (dbi.scram).",
    )
    # Version 1 documents (written before verifiers) carried the password itself; the
    # guest still reads them, dbi no longer writes them.
    admin_password: SecretStr | None = None
    reset: str | None = Field(
        default=None,
        max_length=64,
        description="A token: a boot that has not applied it yet sets the admin role's "
        "password to admin_verifier on initialized data (break-glass recovery).",
    )
    port: int = Field(default=5432, ge=1, le=65535)
    # Memory given to PostgreSQL, in bytes, so its settings fit the VM.
    memory_bytes: int | None = Field(default=None, ge=0)
    # The server's certificate (PEM) and its key; documents before version 3 have none.
    server_cert: str | None = None
    server_key: SecretStr | None = None
    # An instance restored from a backup (version 4): its first boot starts from it.
    restore: Restore | None = None
    # A major upgrade (version 5): see the module's documentation.
    upgrade: Upgrade | None = None
    # A replica member (version 8): its first boot clones the primary, every boot
    # streams from it (guest.replica).
    replica: Replica | None = None

    @model_validator(mode="after")
    def _has_a_credential(self) -> Bootstrap:
        if self.admin_verifier is None and self.admin_password is None:
            raise ValueError("the bootstrap document has no admin credential")
        return self

    def server_pair(self) -> tls.KeyPair | None:
        """The server's certificate and key, when the document carries both."""
        if self.server_cert is None or self.server_key is None:
            return None
        return tls.KeyPair(self.server_cert, self.server_key.get_secret_value())

    def initial_password(self) -> str:
        """What initdb sets for the admin role: the verifier (or a version 1 password)."""
        if self.admin_verifier is not None:
            return self.admin_verifier
        assert self.admin_password is not None
        return self.admin_password.get_secret_value()


def to_document(doc: Bootstrap) -> str:
    """Return ``doc`` as the guest reads it (JSON: ``guest.document``)."""
    payload = doc.model_dump(exclude_none=True)
    if doc.restore is not None and doc.restore.archive_url is not None:
        # A guest that cannot replay it (or stop at an LSN) refuses it.
        payload["version"] = max(doc.version, 7 if doc.restore.target_lsn else 6)
    if doc.replica is not None:
        payload["version"] = max(doc.version, 8)
        payload["replica"]["password"] = doc.replica.password.get_secret_value()
    if doc.admin_password is not None:
        payload["admin_password"] = doc.admin_password.get_secret_value()
    if doc.server_key is not None:
        payload["server_key"] = doc.server_key.get_secret_value()
    return json.dumps(payload, sort_keys=True)


def to_userdata(doc: Bootstrap) -> str:
    """Return the cloud-init user-data that delivers ``doc`` to the VM."""
    config = {
        "write_files": [
            {
                "path": PATH,
                "permissions": "0600",
                "owner": "root:root",
                "content": to_document(doc),
            }
        ],
        # Every boot: a reset may come later. No path: the guest reads the document from
        # the seed disk, where it is current (guest.seed); bootcmd runs before
        # write_files, and write_files once per instance.
        "bootcmd": [[COMMAND]],
    }
    # JSON is YAML: cloud-init reads it, and so does the guest's standard library.
    return "#cloud-config\n" + json.dumps(config, indent=1)


# libyaml's safe loader when PyYAML has it (parsing the user-data is on every pass's
# credentials step, and the pure-Python loader is ten times slower); the same rules.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def from_userdata(userdata: str) -> Bootstrap:
    """Return the bootstrap document in cloud-init user-data; raise ValueError if absent."""
    if not userdata.startswith("#cloud-config"):
        raise ValueError("user-data is not a #cloud-config document")
    try:
        config: Any = yaml.load(userdata, Loader=_SAFE_LOADER)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as e:
        raise ValueError(f"user-data is not valid YAML ({type(e).__name__})") from None
    files = config.get("write_files", []) if isinstance(config, dict) else []
    for entry in files:
        if isinstance(entry, dict) and entry.get("path") == PATH:
            return Bootstrap.model_validate_json(entry.get("content", ""))
    raise ValueError(f"user-data writes no {PATH}")


# What the guest's PostgreSQL is configured with (``guest.files``): by the boot, and by
# a live renewal of the certificate (the tls step).
TLS_CONF = files.TLS_CONF
PG_HBA = files.PG_HBA
SLOTS = files.SLOTS
tls_files = files.tls_files
other_slot = files.other_slot
