"""``python without_worker.py ARGS``: run ``dbi ARGS`` as an install without the
``worker`` extra would (``pipx install dbi`` on a workstation): importing a module of
any distribution outside the closure of dbi's own requirements (those without an extra)
fails as a missing module does. ``--blocked`` prints the modules it refuses."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from importlib import metadata
from types import ModuleType

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

OURS = {"dbi", "commands", "images", "guest", "activities", "workflows", "watcher"}


def closure(root: str = "dbi") -> set[str]:
    """The distributions ``root`` needs without any extra, transitively."""
    seen: set[tuple[str, frozenset[str]]] = set()
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset())]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if (key, extras) in seen:
            continue
        seen.add((key, extras))
        for line in metadata.requires(name) or []:
            requirement = Requirement(line)
            wanted = requirement.marker is None or any(
                requirement.marker.evaluate({"extra": extra}) for extra in ("", *extras)
            )
            if wanted:
                todo.append((requirement.name, frozenset(requirement.extras)))
    return {key for key, _ in seen}


def blocked() -> set[str]:
    needed = closure()
    return {
        module
        for module, dists in metadata.packages_distributions().items()
        if module not in OURS
        and module not in sys.stdlib_module_names
        and not {canonicalize_name(d) for d in dists} & needed
    }


class Refuse(importlib.abc.MetaPathFinder):
    def __init__(self, modules: set[str]) -> None:
        self.modules = modules

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name.split(".", maxsplit=1)[0] in self.modules:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if __name__ == "__main__":
    refused = blocked()
    if sys.argv[1:] == ["--blocked"]:
        print("\n".join(sorted(refused)))
        sys.exit(0)
    sys.meta_path.insert(0, Refuse(refused))
    from commands.main import run

    sys.argv[0] = "dbi"
    run()
