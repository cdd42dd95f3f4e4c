"""The lock files (devstack/lock.py): each gives what pyproject.toml asks for, every
version with the hashes pip checks, the image's lock a part of the dev lock; and the
SBOM tool the image's build runs lists an environment installed from the lock."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from devstack import lock, tools


@dataclass(frozen=True)
class Pin:
    version: str
    marker: Marker | None
    hashes: tuple[str, ...]

    def applies(self) -> bool:
        """Whether this interpreter installs it (its marker holds here)."""
        return self.marker is None or self.marker.evaluate()


def pins(relative: str) -> dict[str, Pin]:
    """The lock's pins by canonical name: ``name==version [; marker]`` and the
    ``--hash`` lines after it (continuation lines joined)."""
    text = (tools.REPO_ROOT / relative).read_text().replace("\\\n", " ")
    found: dict[str, Pin] = {}
    for line in text.splitlines():
        if not line or line.startswith(("#", " ")):
            continue
        spec, *hashes = (part.strip() for part in line.split("--hash="))
        requirement, _, marker = spec.partition(";")
        name, version = requirement.strip().split("==")
        found[canonicalize_name(name)] = Pin(
            version, Marker(marker) if marker.strip() else None, tuple(hashes)
        )
    return found


def test_every_version_is_pinned_with_hashes_and_the_image_runs_what_the_tests_ran() -> None:
    dev, worker = pins(lock.DEV), pins(lock.WORKER)
    assert len(dev) > 100 and len(worker) > 50
    for name, pin in [*dev.items(), *worker.items()]:
        assert pin.hashes and all(h.startswith("sha256:") for h in pin.hashes), name
    assert {n: p.version for n, p in worker.items()} == {n: dev[n].version for n in worker}


def test_each_lock_gives_what_pyproject_asks_for() -> None:
    """Every requirement of pyproject.toml (and of the image's build) is pinned in the
    lock that installs it, at a version its specifier allows."""
    with (tools.REPO_ROOT / "pyproject.toml").open("rb") as f:
        project = tomllib.load(f)["project"]
    extras = project["optional-dependencies"]
    build = [
        line
        for line in (tools.REPO_ROOT / lock.IMAGE_BUILD).read_text().splitlines()
        if line and not line.startswith("#")
    ]
    wanted = {
        lock.WORKER: [*project["dependencies"], *extras["worker"], *build],
        lock.DEV: [r for r in extras["dev"] if not r.startswith("dbi[")],
    }
    for path, requirements in wanted.items():
        pinned = pins(path)
        for requirement in map(Requirement, requirements):
            name = canonicalize_name(requirement.name)
            assert name in pinned, f"{path} lacks {requirement}: python -m devstack.lock"
            version = pinned[name].version
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{path} pins {name}=={version}, pyproject.toml asks {requirement}"
            )


def test_the_sbom_lists_every_locked_package_of_the_environment(tmp_path: Path) -> None:
    """cyclonedx-py, as the Dockerfile runs it, on this environment (installed from
    dev.lock by ./dev): dbi is the root and each of worker.lock's packages that this
    interpreter installs is a component at its locked version."""
    sbom = tmp_path / "sbom.cdx.json"
    subprocess.run(
        [
            str(tools.venv_tool("cyclonedx-py")),
            "environment",
            "--pyproject",
            str(tools.REPO_ROOT / "pyproject.toml"),
            "--output-format",
            "JSON",
            "--output-file",
            str(sbom),
            sys.executable,
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    document = json.loads(sbom.read_text())
    assert document["bomFormat"] == "CycloneDX"
    assert document["metadata"]["component"]["name"] == "dbi"
    listed: dict[str, str] = {
        canonicalize_name(c["name"]): c["version"] for c in document["components"]
    }
    expected = {n: p.version for n, p in pins(lock.WORKER).items() if p.applies()}
    assert {n: listed.get(n) for n in expected} == expected
