"""``dbi --help`` lists the commands in groups: what an operator runs against instances
(every command not named below, in the order they are added), what installs and runs
dbi, and what develops it (in a checkout)."""

from __future__ import annotations

import argparse

INSTANCES = "instances"
GROUPS = (
    ("install and run dbi", ("temporal", "worker", "watcher", "image", "completion")),
    ("develop dbi (in a checkout)", ("dev", "bench")),
)


def grouped(commands: list[str]) -> list[tuple[str, list[str]]]:
    """``commands`` (in the order added) under their groups' titles, instances first."""
    named = {name for _, names in GROUPS for name in names}
    return [
        (INSTANCES, [c for c in commands if c not in named]),
        *((title, [c for c in names if c in commands]) for title, names in GROUPS),
    ]


class Grouped(argparse.HelpFormatter):
    """argparse's formatter, with the subcommands under one heading per group."""

    def _format_action(self, action: argparse.Action) -> str:
        if not isinstance(action, argparse._SubParsersAction):
            return super()._format_action(action)
        by_name = {a.dest: a for a in action._get_subactions()}
        parts = []
        for title, names in grouped(list(by_name)):
            parts.append(f"{' ' * self._current_indent}{title}:\n")
            self._indent()
            parts += [super(Grouped, self)._format_action(by_name[n]) for n in names]
            self._dedent()
        return "".join(parts)
