"""The data disk as every part of a boot sees it: which data directory it boots, of
which major, and how the guest runs PostgreSQL's tools on it (``Host``)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from guest import files


@dataclass(frozen=True, kw_only=True)
class Host:
    """How this guest runs PostgreSQL's tools: the binaries of each major it carries
    (an image of a major carries the previous majors' too: pg_upgrade needs them) and
    the user they run as (None: this process's)."""

    binaries: dict[int, Path]
    user: tuple[int, int] | None = None  # uid, gid
    login: str = "postgres"  # the user's name: pg_ident.conf maps it to the admin role

    def tool(self, major: int, name: str) -> str:
        if major not in self.binaries:
            raise RuntimeError(f"this image carries no PostgreSQL {major} binaries")
        return str(self.binaries[major] / name)

    def run(
        self, argv: list[str], *, stdin: str | None = None, cwd: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as the PostgreSQL user, capturing what it says."""
        prefix = []
        if self.user is not None:
            uid, gid = self.user
            prefix = ["setpriv", "--reuid", str(uid), "--regid", str(gid), "--clear-groups"]
        return subprocess.run(
            [*prefix, *argv],
            input=stdin,
            stdin=None if stdin is not None else subprocess.DEVNULL,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=False,
        )

    def own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, *self.user)


def pgdata(disk: Path) -> Path:
    """The data directory this disk boots: the one ``current`` names, else ``pgdata``."""
    pointer = disk / files.CURRENT
    name = pointer.read_text().strip() if pointer.exists() else ""
    return disk / (name or files.DATA)


def initialized(disk: Path) -> bool:
    return (pgdata(disk) / "PG_VERSION").exists()


def data_major(disk: Path) -> int:
    return int((pgdata(disk) / "PG_VERSION").read_text().strip())


def conf_quote(value: str) -> str:
    """``value`` inside a postgresql.conf string: its quotes doubled."""
    return value.replace("'", "''")


def include(data: Path, name: str) -> None:
    """Make postgresql.conf include ``name`` (once)."""
    conf = data / "postgresql.conf"
    include = f"include_if_exists = '{name}'"
    if include not in conf.read_text():
        with conf.open("a") as f:
            f.write(f"\n{include}\n")


def tail(output: str, lines: int = 12) -> str:
    """What a tool said last, without pg_upgrade's "... ok" progress lines."""
    said = [line for line in output.strip().splitlines() if not line.rstrip().endswith(" ok")]
    return "\n".join(line.strip() for line in said[-lines:] if line.strip())[-2000:]
