"""WAL files by name, and the archived ones a restore needs (pure).

A segment's name is its timeline and number, 8 hex digits each for the timeline, the
high and the low part (``000000010000000000000003``); dbi's servers use 16 MiB
segments (initdb's default), 256 to each high part. A restore from a base backup needs
every segment from the one holding the backup's start to the last one archived, with
no gap: recovery stops at the first segment it cannot fetch. So retention keeps every
segment from the oldest kept backup's start on, and no earlier one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

SEGMENT_BYTES = 16 * 2**20
_PER_HIGH = 2**32 // SEGMENT_BYTES
_SEGMENT = re.compile(r"^([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{8})$")
_HISTORY = re.compile(r"^[0-9A-F]{8}\.history$")
ARCHIVED_SUFFIX = ".gz"


@dataclass(frozen=True, order=True)
class Segment:
    timeline: int
    number: int

    @property
    def name(self) -> str:
        high, low = divmod(self.number, _PER_HIGH)
        return f"{self.timeline:08X}{high:08X}{low:08X}"


def segment(name: str) -> Segment | None:
    """The segment a file name is, or None (a history file, a backup label, other)."""
    found = _SEGMENT.match(name)
    if found is None:
        return None
    timeline, high, low = (int(part, 16) for part in found.groups())
    return Segment(timeline, high * _PER_HIGH + low)


def lsn_value(lsn: str) -> int:
    """``0/2000028`` as a number."""
    high, _, low = lsn.partition("/")
    return (int(high, 16) << 32) | int(low, 16)


def lag_bytes(lsn: str, stored: str) -> int:
    """Bytes of WAL written up to ``lsn`` past the end of the segment ``stored`` (a
    segment's name): what a restore could not reach yet; 0 when ``lsn`` is not past it."""
    last = segment(stored)
    if last is None:
        raise ValueError(f"{stored!r} is not a WAL segment's name")
    return max(0, lsn_value(lsn) - (last.number + 1) * SEGMENT_BYTES)


def holding(lsn: str, timeline: int) -> Segment:
    """The segment that holds ``lsn`` on ``timeline``."""
    return Segment(timeline, lsn_value(lsn) // SEGMENT_BYTES)


@dataclass(frozen=True)
class Needed:
    """The archived files a restore fetches (names without ARCHIVED_SUFFIX), and the
    last segment it reaches; or why the archive cannot serve it."""

    files: list[str]
    last: Segment | None = None
    problem: str | None = None
    # Nothing of the timeline from the start on is archived (yet): the archive holds
    # nothing a replay past the backup's own end could use.
    none_since: bool = False


def needed(archived: list[str], start: Segment) -> Needed:
    """The files of ``archived`` (names as stored, with ARCHIVED_SUFFIX) that a restore
    from a base backup starting in ``start`` replays: its timeline's segments from
    ``start`` on, which must follow each other without a gap, and every timeline's
    history file."""
    names = [n[: -len(ARCHIVED_SUFFIX)] for n in archived if n.endswith(ARCHIVED_SUFFIX)]
    on_timeline = sorted(
        s for s in map(segment, names) if s is not None and s.timeline == start.timeline
    )
    after = [s for s in on_timeline if s >= start]
    if not after or after[0] != start:
        return Needed(
            files=[],
            problem=f"WAL segment {start.name}, where the backup begins, is not archived "
            "(WAL archiving began after this backup, or it was deleted)",
            none_since=not after,
        )
    last = after[0]
    for s in after[1:]:
        if s.number != last.number + 1:
            missing = Segment(start.timeline, last.number + 1).name
            return Needed(
                files=[],
                last=last,
                problem=f"WAL segment {missing} is missing from the archive: it reaches "
                f"{last.name} without a gap, then resumes at {s.name}",
            )
        last = s
    histories = sorted(n for n in names if _HISTORY.match(n))
    return Needed(files=histories + [s.name for s in after], last=last)


def prunable(archived: list[str], starts: list[Segment]) -> list[str]:
    """The files of ``archived`` (names as stored) that no restore from a kept base backup
    replays, given the segments the kept backups begin in (``starts``): the segments
    before the earliest start, on any timeline, and the backup labels and partial
    segments named after them. History files stay (a restore reads every one); with no
    start (no kept backup) nothing goes."""
    if not starts:
        return []
    first = min(start.number for start in starts)
    doomed = []
    for name in archived:
        stem = name.removesuffix(ARCHIVED_SUFFIX)
        found = segment(stem[:24]) if stem[24:25] in ("", ".") else None
        if name.endswith(ARCHIVED_SUFFIX) and found is not None and found.number < first:
            doomed.append(name)
    return sorted(doomed)


def superseded(stored: Iterable[str], kept: Iterable[str]) -> list[str]:
    """The database systems of ``stored`` (their identifiers, as the store names them)
    whose archived WAL no restore replays, given the systems the kept backups are of
    (``kept``): each that no kept backup is of and older than one that is, the one a major
    upgrade replaced once its last backup is gone. PostgreSQL makes a system's identifier
    from the time its initdb ran (the seconds in its upper 32 bits), so an upgrade's new
    system has a larger one than the one it replaces. A system no kept backup is of and
    newer than every one that is (the new one after an upgrade, before its first backup
    completes) keeps its WAL; with no kept backup, every system does."""
    ours = {system for system in kept if system.isdigit()}
    if not ours:
        return []
    newest = max(int(system) for system in ours)
    return sorted(s for s in set(stored) if s.isdigit() and s not in ours and int(s) < newest)
