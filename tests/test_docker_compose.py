"""docker-compose.yml stays true to the code (there is no Docker engine to run it here)."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import yaml

from dbi import names


def test_compose_temporal_registers_the_search_attributes(repo_root: Path) -> None:
    """The compose file's Temporal registers exactly the search attributes the code uses."""
    compose = yaml.safe_load((repo_root / "docker-compose.yml").read_text())
    command = compose["services"]["temporal"]["command"]
    registered = {
        key: kind
        for flag, value in pairwise(command)
        if flag == "--search-attribute"
        for key, kind in [value.split("=", 1)]
    }
    assert registered == {key: str(kind) for key, kind in names.SEARCH_ATTRIBUTES.items()}
