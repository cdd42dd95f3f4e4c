"""Wakeups that record what they would signal."""

from __future__ import annotations

from typing import Any, cast

from dbi.messages import SeenInstance
from watcher.wakeups import Origin, Wakeups


class Recording(Wakeups):
    """Wake-ups that record what they would signal."""

    def __init__(self) -> None:
        super().__init__(client=cast(Any, None))
        self.notes: list[tuple[str, str, bool, bool]] = []  # and gone, relist
        self.seen: list[tuple[str, SeenInstance | None]] = []  # each note's reason, seen

    def note(  # noqa: PLR0913 (as Wakeups.note)
        self,
        key: tuple[str, str],
        reason: str,
        generation: int | None,
        *,
        gone: bool = False,
        retry: bool = False,
        origin: Origin = Origin.CHANGE,
        seen: SeenInstance | None = None,
    ) -> None:
        self.notes.append((*key, gone, origin is Origin.RELIST))
        self.seen.append((reason, seen))
