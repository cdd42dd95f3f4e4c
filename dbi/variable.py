"""A setting dbi reads from the environment: its name, default, meaning and readers,
and its value read and checked (a malformed value is an error that names it).
``dbi.environment`` is the table of every one."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar


class Process(StrEnum):
    WORKER = "worker"
    WATCHER = "watcher"
    CLI = "cli"  # dbi status, describe, rotate, resize


WORKER, WATCHER, CLI = Process.WORKER, Process.WATCHER, Process.CLI
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None  # None: unset means "not used" (see meaning)
    meaning: str
    read_by: frozenset[Process]

    def get(self) -> str | None:
        """The value, or the default when the variable is unset or empty."""
        return os.environ.get(self.name) or self.default

    def value(self) -> str:
        """The value or the default; an error naming the variable when it has neither."""
        found = self.get()
        if found is None:
            raise ValueError(f"{self.name} must be set")
        return found

    def items(self) -> frozenset[str] | None:
        """The value as a comma-separated set (blanks dropped); None when unset."""
        raw = self.get()
        return frozenset(n.strip() for n in raw.split(",") if n.strip()) if raw else None

    def _parsed(self, parse: Callable[[str], N], what: str) -> N | None:
        """The value as ``parse`` reads it; an error naming the variable when it cannot."""
        raw = self.get()
        try:
            return None if raw is None else parse(raw)
        except ValueError:
            raise ValueError(f"{self.name} must be {what}, not {raw!r}") from None

    def integer(self, *, low: int = 0, high: int | None = None) -> int | None:
        """The value as a whole number in [low, high]; a clear error otherwise."""
        value = self._parsed(int, "a whole number")
        if value is not None and (value < low or (high is not None and value > high)):
            top = "" if high is None else f" and at most {high}"
            raise ValueError(f"{self.name} must be at least {low}{top}, not {value}")
        return value

    def seconds(self) -> float | None:
        """The value as a positive number of seconds; a clear error otherwise."""
        value = self._parsed(float, "a number of seconds")
        if value is not None and not value > 0:
            raise ValueError(f"{self.name} must be more than 0 seconds, not {self.get()!r}")
        return value


def var(name: str, default: str | None, meaning: str, *read_by: Process) -> Variable:
    return Variable(name, default, meaning, frozenset(read_by))
