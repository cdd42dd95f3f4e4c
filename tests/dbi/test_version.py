"""`dbi --version`: the release and the commit, from the image's record or the checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from dbi import version
from devstack import tools


def test_a_checkout_names_its_head() -> None:
    head = subprocess.run(
        ["git", "-C", str(tools.REPO_ROOT), "rev-parse", "--short=12", "HEAD"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert version.commit().removesuffix("-dirty") == head
    assert version.describe().endswith(f"(commit {version.commit()})")


def test_an_image_names_the_commit_it_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = tmp_path / "COMMIT"
    recorded.write_text("0123456789ab\n")
    monkeypatch.setattr(version, "RECORDED", recorded)
    assert version.commit() == "0123456789ab"


def test_an_install_outside_a_checkout_says_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """site-packages inside some other repository's work tree is not dbi's checkout."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    commit = ["commit", "-q", "--allow-empty", "-m", "another project"]
    subprocess.run(["git", "-C", str(tmp_path), *identity, *commit], check=True)
    (tmp_path / "site-packages" / "dbi").mkdir(parents=True)
    monkeypatch.setattr(version, "RECORDED", tmp_path / "site-packages" / "dbi" / "COMMIT")
    monkeypatch.setattr(version, "HERE", tmp_path / "site-packages" / "dbi")
    assert version.commit() == "unknown"


def test_the_command_prints_it() -> None:
    out = subprocess.run(
        [str(tools.venv_tool("dbi")), "--version"], check=True, capture_output=True, text=True
    ).stdout
    assert out.strip() == version.describe()
