"""What kstatus (sigs.k8s.io/cli-utils/pkg/kstatus, the rules Flux, kpt and Argo CD's
kstatus users follow) concludes from objects: the real Go library, in a small program
(``kstatus/``) built once per source into the devstack cache. Dev and test tooling."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from devstack import gobuild

SOURCE_DIR = Path(__file__).resolve().parent / "kstatus"


def build() -> Path:
    """The kstatus helper, built first if the cache lacks it."""
    return gobuild.build(SOURCE_DIR, "kstatus", what="the kstatus helper")


def compute(binary: Path, objects: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
    """(status, message) kstatus computes for each object, in order."""
    out = subprocess.run(
        [str(binary)],
        input=json.dumps(list(objects)),
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    return [(r["status"], r["message"]) for r in map(json.loads, out.splitlines())]
