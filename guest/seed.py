"""The document as the orchestrator last wrote it: read from the cloud-init seed disk
at every boot, not from cloud-init's copy.

cloud-init runs ``bootcmd`` before ``write_files``, and ``write_files`` once per
instance: ``/etc/dbi/bootstrap.json`` is missing on a first boot and stale after a
change (a reset, an upgrade, a renewed certificate) while the instance-id stays the
same. The seed disk (NoCloud, labelled ``cidata``), made anew from the instance's
Secret at each VM start, always holds the current one. dbi writes its user-data as
JSON after the ``#cloud-config`` line (valid YAML), so the standard library reads it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from guest import files

LABELS = ("cidata", "CIDATA")  # iso9660 (KubeVirt's) and vfat


def document_in(userdata: str) -> Any | None:
    """The bootstrap document (decoded JSON) dbi's user-data writes, or None when the
    user-data is not dbi's JSON form or writes no document."""
    header, _, body = userdata.partition("\n")
    if header.strip() != "#cloud-config":
        return None
    try:
        config = json.loads(body)
    except ValueError:
        return None  # YAML that is not JSON: user-data written before this form
    entries = config.get("write_files") if isinstance(config, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and entry.get("path") == files.DOCUMENT:
            try:
                return json.loads(entry.get("content", ""))
            except ValueError:
                return None
    return None


def devices() -> list[str]:
    """The block devices labelled as a NoCloud seed."""
    found: list[str] = []
    for label in LABELS:
        ran = subprocess.run(
            ["blkid", "-t", f"LABEL={label}", "-o", "device"],
            capture_output=True,
            text=True,
            check=False,
        )
        found += [d for d in ran.stdout.split() if d not in found]
    return found


def read(candidates: list[str] | None = None) -> Any | None:
    """The document on the seed disk (``candidates``: the devices to look at; default:
    those labelled cidata), or None when there is no seed or it holds none."""
    for device in devices() if candidates is None else candidates:
        with tempfile.TemporaryDirectory(prefix="dbi-seed-") as target:
            ran = subprocess.run(
                ["mount", "-o", "ro", device, target], capture_output=True, text=True, check=False
            )
            if ran.returncode != 0:
                continue
            try:
                userdata = Path(target, "user-data")
                found = document_in(userdata.read_text()) if userdata.exists() else None
            finally:
                subprocess.run(["umount", target], capture_output=True, check=False)
        if found is not None:
            return found
    return None
