"""`dbi --help` lists every command once, under the group it belongs to."""

from __future__ import annotations

import argparse

from commands import helptext
from commands.main import build_parser


def test_every_command_is_listed_once_under_its_group() -> None:
    parser = build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    groups = helptext.grouped(list(commands.choices))
    named = [name for _, names in helptext.GROUPS for name in names]
    assert set(named) <= set(commands.choices), "a group names a command that is gone"
    assert {"status", "describe", "logs", "report"} <= set(groups[0][1])
    text = parser.format_help()
    headings = [text.index(f"\n  {title}:\n") for title, _ in groups]
    assert headings == sorted(headings)
    for (_, names), start, end in zip(groups, headings, [*headings[1:], len(text)], strict=True):
        listed = [line.split()[0] for line in text[start:end].splitlines()[2:] if line[4:5] != " "]
        assert listed == names, text
    assert sorted(n for _, names in groups for n in names) == sorted(commands.choices)
