"""The guest reads the document from the seed disk, where it is current at every boot,
in the JSON form dbi writes its user-data in (plain data, then a real block device)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbi import bootstrap, scram
from guest import seed

DOC = bootstrap.Bootstrap(admin_verifier=scram.verifier("seed-password"), reset="token-2")


def test_the_document_dbi_writes_reads_back_from_its_user_data() -> None:
    userdata = bootstrap.to_userdata(DOC)
    assert seed.document_in(userdata) == json.loads(bootstrap.to_document(DOC))
    assert bootstrap.from_userdata(userdata) == DOC  # cloud-init's reading: YAML, the same
    assert json.loads(userdata.partition("\n")[2])["bootcmd"] == [[bootstrap.COMMAND]]


@pytest.mark.parametrize(
    "userdata",
    [
        pytest.param("#cloud-config\nwrite_files:\n- path: /etc/dbi/bootstrap.json\n", id="yaml"),
        pytest.param("#cloud-config\n{}", id="no-files"),
        pytest.param('#cloud-config\n{"write_files": [{"path": "/etc/other"}]}', id="other"),
        pytest.param("#!/bin/sh\necho hi", id="not-cloud-config"),
    ],
)
def test_user_data_without_dbis_json_document_gives_none(userdata: str) -> None:
    assert seed.document_in(userdata) is None


@pytest.fixture
def seed_disk(tmp_path: Path) -> Iterator[str]:
    """A loop device with a filesystem labelled cidata holding dbi's user-data (ext4:
    this kernel mounts no vfat; a VM's seed is vfat or iso9660, mounted the same way)."""
    content = tmp_path / "seed"
    content.mkdir()
    (content / "user-data").write_text(bootstrap.to_userdata(DOC))
    (content / "meta-data").write_text("instance-id: db.team-a\n")
    image = tmp_path / "seed.img"
    subprocess.run(["truncate", "-s", "8M", str(image)], check=True)
    subprocess.run(["mkfs.ext4", "-q", "-L", "cidata", "-d", str(content), str(image)], check=True)
    device = subprocess.run(
        ["losetup", "--find", "--show", str(image)], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        yield device
    finally:
        subprocess.run(["losetup", "--detach", device], check=False)


def test_the_seed_disk_gives_the_current_document(seed_disk: str) -> None:
    assert seed.read([seed_disk]) == json.loads(bootstrap.to_document(DOC))
    assert seed.read(["/dev/null"]) is None  # not mountable: no document, no error
