"""What GitOps tools conclude from a DBInstance: kstatus (the real Go library, built from
``kstatus/``) and Argo CD's health script (``deploy/argocd/health.lua``, run by a real
Lua interpreter)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import lupa

from devstack import gobuild

ROOT = Path(__file__).resolve().parents[2]
KSTATUS_SOURCE = Path(__file__).resolve().parent / "kstatus"
HEALTH_LUA = ROOT / "deploy" / "argocd" / "health.lua"


def build_kstatus() -> Path:
    """The kstatus helper, built once per source into the devstack cache."""
    return gobuild.build(KSTATUS_SOURCE, "kstatus", what="the kstatus helper")


def kstatus(binary: Path, objects: Iterable[dict[str, Any]]) -> list[tuple[str, str]]:
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


def argo_health(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) the Argo CD health script gives ``obj``."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(HEALTH_LUA.read_text())
    return str(hs["status"]), str(hs["message"])
