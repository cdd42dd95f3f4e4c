"""The image recipe as data: what an image carries, what its digest covers (a change
rebuilds it, nothing else does), and the manifest and command around it."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from dbi import names
from devstack import tools
from devstack.vmstandin import qemu
from images import build, postgresql
from images.recipe import GUEST, Recipe

REPO = tools.REPO_ROOT


def test_an_image_carries_its_build_and_every_earlier_majors_newest() -> None:
    recipe = Recipe("16.13.0")
    assert recipe.builds == {14: "14.23.0", 15: "15.19.0", 16: "16.13.0"}
    assert recipe.name == "dbi-postgresql-16-13"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", recipe.name)


def test_the_digest_follows_the_recipe_the_guest_and_nothing_else() -> None:
    same = Recipe("16.15.0")
    assert same.digest() == Recipe("16.15.0").digest()
    assert same.digest() != Recipe("16.13.0").digest()  # another build
    assert same.digest() != Recipe("16.15.0", mirror="http://mirror.example/debian").digest()
    # The Debian root is shared by every version, and rebuilt for a new mirror only.
    assert same.base_digest() == Recipe("18.6.0").base_digest()
    assert same.base_digest() != Recipe("16.15.0", mirror="http://m.example/d").base_digest()


def test_a_change_to_the_guest_program_makes_a_new_image(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    before = Recipe("16.15.0").digest()
    guest = tmp_path / "guest"
    guest.mkdir()
    for source in GUEST.glob("*.py"):
        (guest / source.name).write_text(source.read_text())
    monkeypatch.setattr("images.recipe.GUEST", guest)
    assert Recipe("16.15.0").digest() == before
    (guest / "boot.py").write_text((guest / "boot.py").read_text() + "\n# changed\n")
    assert Recipe("16.15.0").digest() != before


@pytest.mark.parametrize(
    ("given", "full"), [("16.15", "16.15.0"), ("16.15.0", "16.15.0"), ("17", "17.11.0")]
)
def test_a_version_is_read_as_the_wheel_names_it(given: str, full: str) -> None:
    assert postgresql.full_version(given) == full


@pytest.mark.parametrize("bad", ["sixteen", "16.x", "99", "1.2.3.4"])
def test_a_version_that_is_no_build_is_refused_by_name(bad: str) -> None:
    with pytest.raises(postgresql.FetchFailed, match=re.escape(bad) if not bad.isdigit() else "99"):
        postgresql.full_version(bad)


def test_the_manifest_is_harvesters_with_the_label_preflight_reads() -> None:
    body = build.manifest(Recipe("18.6.0"), "ab" * 64, url="https://files.example/x.qcow2")
    assert body["kind"] == "VirtualMachineImage"
    assert body["metadata"]["labels"] == {names.IMAGE_VERSION_LABEL: "18.6.0"}  # type: ignore[index]
    assert body["spec"]["checksum"] == "ab" * 64  # type: ignore[index]
    assert body["spec"]["url"] == "https://files.example/x.qcow2"  # type: ignore[index]


def dbi_image(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.venv_tool("dbi")), "image", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_dbi_image_manifest_of_an_image_not_built_says_how_to_build_it(tmp_path: Path) -> None:
    ran = dbi_image(
        *("manifest", "--version", "16.15", "--url", "https://x.example/i.qcow2"),
        *("--cache", str(tmp_path)),
    )
    assert ran.returncode == 1
    assert "run `dbi image build --version 16.15` first" in ran.stderr


def test_dbi_image_refuses_a_version_naming_it(tmp_path: Path) -> None:
    ran = dbi_image("build", "--version", "16.x", "--cache", str(tmp_path))
    assert ran.returncode == 1
    assert "'16.x' is not a PostgreSQL version" in ran.stderr
    assert list(tmp_path.iterdir()) == []


def test_ci_installs_the_packages_the_qemu_mode_needs() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    (listed,) = re.findall(r'^packages="([^"]*)"', ci, flags=re.M)
    assert listed.split() == qemu.PACKAGES.split()


def test_a_build_prunes_images_and_roots_unused_for_five_days(tmp_path: Path) -> None:
    """What no build or boot used for five days goes; an image found built since stays."""
    recipe = Recipe("17.11.0")
    kept = tmp_path / f"{recipe.name}-{recipe.digest()[:12]}"
    old = tmp_path / "dbi-postgresql-17-11-0123456789ab"
    for image in (kept, old):
        image.mkdir()
        (image / build.DISK).write_bytes(b"qcow2")
        (image / "image.json").write_text("{}")
    (tmp_path / "debian-old.tar").write_bytes(b"tar")
    (tmp_path / "debian-new.tar").write_bytes(b"tar")
    days = 24 * 3600
    for path, age in (
        (kept / "image.json", 10 * days),
        (old / "image.json", 10 * days),
        (tmp_path / "debian-old.tar", 6 * days),
        (tmp_path / "debian-new.tar", 4 * days),
    ):
        os.utime(path, (time.time() - age, time.time() - age))

    assert build.cached(recipe, tmp_path) is not None  # a boot finds it: used now
    gone = build.prune(tmp_path)

    assert sorted(p.name for p in gone) == [old.name, "debian-old.tar"]
    assert kept.exists() and (tmp_path / "debian-new.tar").exists()
    assert not old.exists() and not (tmp_path / "debian-old.tar").exists()
