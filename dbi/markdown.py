"""Generated blocks in Markdown docs: the text between two marker comments."""

from __future__ import annotations


def replace_between(text: str, start: str, end: str, body: str) -> str:
    """Return ``text`` with what lies between ``start`` and ``end`` replaced by ``body``."""
    head, found, rest = text.partition(start)
    _, found_end, tail = rest.partition(end)
    if not (found and found_end):
        raise ValueError(f"the text has no {start} ... {end} block")
    return f"{head}{start}\n{body.rstrip()}\n{end}{tail}"
