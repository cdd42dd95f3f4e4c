"""The first-boot document a DBInstance's VM receives through cloud-init.

The orchestrator writes it into the VM's cloud-init user-data Secret as a
``#cloud-config`` that drops ``/etc/dbi/bootstrap.json`` (mode 0600) and runs
``dbi-bootstrap`` on it. A real VM image ships ``dbi-bootstrap``, which initializes
PostgreSQL once, with the admin role and password, and configures it to listen;
the local stack's VM stand-in reads the same document and does the same. Later boots
find an initialized data directory and leave it alone: the password in the document
only matters the first time.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr

PATH = "/etc/dbi/bootstrap.json"
COMMAND = "/usr/local/bin/dbi-bootstrap"
USERDATA_KEY = "userdata"


class Bootstrap(BaseModel):
    """What the first boot needs: the admin role, its password, and where to listen."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: int = Field(default=1, description="Document format version.")
    admin_user: str = Field(default="dbi_admin", pattern=r"^[a-z_][a-z0-9_]*$")
    admin_password: SecretStr
    port: int = Field(default=5432, ge=1, le=65535)
    # Memory given to PostgreSQL, in bytes, so its settings fit the VM.
    memory_bytes: int | None = Field(default=None, ge=0)


def to_userdata(doc: Bootstrap) -> str:
    """Return the cloud-init user-data that delivers ``doc`` to the VM."""
    payload = {**doc.model_dump(), "admin_password": doc.admin_password.get_secret_value()}
    config = {
        "write_files": [
            {
                "path": PATH,
                "permissions": "0600",
                "owner": "root:root",
                "content": json.dumps(payload, sort_keys=True),
            }
        ],
        "runcmd": [[COMMAND, PATH]],
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
