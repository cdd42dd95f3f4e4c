"""What Argo CD concludes from a DBInstance: its health script
(``deploy/argocd/health.lua``), run by a real Lua interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lupa

HEALTH_LUA = Path(__file__).resolve().parents[2] / "deploy" / "argocd" / "health.lua"


def argo_health(obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) the Argo CD health script gives ``obj``."""
    lua = lupa.LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    hs = lua.execute(HEALTH_LUA.read_text())
    return str(hs["status"]), str(hs["message"])
