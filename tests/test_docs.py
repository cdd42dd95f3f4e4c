"""The docs name only files that exist: every relative link, and every repository path
written in backticks (``activities/steps/vm.py``, ``deploy/base/``), in README.md,
CHANGELOG.md and docs/, resolves in the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dbi import pipeline

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md")])
# A repository path: a top-level folder of the repository, then more of the path.
TOP = sorted(p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith("."))
PATH = re.compile(r"`((?:" + "|".join(map(re.escape, TOP)) + r")/[\w./-]*)`")
# Lines the pages that teach may hold.
LIMITS = {"engine.md": 210, "benchmarks.md": 160}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def named(doc: Path) -> list[tuple[str, Path]]:
    """What ``doc`` names: (as written, where it resolves)."""
    text = doc.read_text()
    found = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#") or "[" in target:
            continue  # a URL, an anchor, or a pattern's brackets
        found.append((target, doc.parent / target.split("#")[0]))
    for path in PATH.findall(text):
        if any(c in path for c in "*<>"):
            continue  # a pattern, not a file
        found.append((path, ROOT / path.split(":")[0]))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=[d.relative_to(ROOT).as_posix() for d in DOCS])
def test_a_doc_names_only_files_that_exist(doc: Path) -> None:
    missing = [written for written, path in named(doc) if not path.exists()]
    assert missing == [], f"{doc.relative_to(ROOT)} names files that do not exist: {missing}"


def test_the_check_finds_a_missing_file(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text("See [the guide](nowhere.md) and `activities/nowhere.py`.")
    assert [w for w, p in named(doc) if not p.exists()] == ["nowhere.md", "activities/nowhere.py"]


def test_engine_md_lists_the_pipelines_as_the_code_has_them() -> None:
    text = " ".join((ROOT / "docs" / "engine.md").read_text().split())
    for name, steps in (("CONVERGE", pipeline.CONVERGE), ("TEARDOWN", pipeline.TEARDOWN)):
        listed = ", ".join(s.name for s in steps)
        assert f"`dbi.pipeline.{name}` ({listed}" in text, name


def test_the_pages_that_teach_stay_short() -> None:
    """engine.md is the contract of a pass and a wait, benchmarks.md the latest figures:
    detail goes to the pages they link, runs to the commits."""
    lines = {name: len((ROOT / "docs" / name).read_text().splitlines()) for name in LIMITS}
    assert {n: c for n, c in lines.items() if c > LIMITS[n]} == {}
