"""The first-boot document a DBInstance's VM receives through cloud-init.

The orchestrator writes it into the VM's cloud-init user-data Secret as a
``#cloud-config`` that drops ``/etc/dbi/bootstrap.json`` (mode 0600) and runs
``dbi-bootstrap`` on it at every boot. A real VM image ships ``dbi-bootstrap``, which
initializes PostgreSQL once, with the admin role and its password's SCRAM verifier
(the document, in a Secret of the tenant's namespace, never holds the password), and
configures it to listen; the local stack's VM stand-in reads the same document and
does the same. Later boots find an initialized data directory and leave it alone, but
for one thing: a ``reset`` token the data directory has not seen yet sets the admin
role's password to the document's verifier (the orchestrator's break-glass recovery
of a lost admin credential), once.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

PATH = "/etc/dbi/bootstrap.json"
COMMAND = "/usr/local/bin/dbi-bootstrap"
USERDATA_KEY = "userdata"


class Bootstrap(BaseModel):
    """What the first boot needs: the admin role, its password's verifier, and where to
    listen; and what a later boot acts on: a reset of the admin password."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(default=2, description="Document format version.")
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

    @model_validator(mode="after")
    def _has_a_credential(self) -> Bootstrap:
        if self.admin_verifier is None and self.admin_password is None:
            raise ValueError("the bootstrap document has no admin credential")
        return self

    def initial_password(self) -> str:
        """What initdb sets for the admin role: the verifier (or a version 1 password)."""
        if self.admin_verifier is not None:
            return self.admin_verifier
        assert self.admin_password is not None
        return self.admin_password.get_secret_value()


def to_userdata(doc: Bootstrap) -> str:
    """Return the cloud-init user-data that delivers ``doc`` to the VM."""
    payload = doc.model_dump(exclude_none=True)
    if doc.admin_password is not None:
        payload["admin_password"] = doc.admin_password.get_secret_value()
    config = {
        "write_files": [
            {
                "path": PATH,
                "permissions": "0600",
                "owner": "root:root",
                "content": json.dumps(payload, sort_keys=True),
            }
        ],
        "bootcmd": [[COMMAND, PATH]],  # every boot: a reset may come later
    }
    return "#cloud-config\n" + yaml.safe_dump(config, sort_keys=False)


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
