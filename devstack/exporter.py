"""The PostgreSQL exporter the process-mode stand-in runs beside each guest, as dbi's
image runs Debian's on port 9187 (``images/files/dbi-exporter.service``):
postgres_exporter (github.com/prometheus-community/postgres_exporter), pinned in
``exporter/go.mod`` and built once per pin into the devstack cache, like the control
plane. Dev and test tooling."""

from __future__ import annotations

from pathlib import Path

from devstack import gobuild

SOURCE_DIR = Path(__file__).resolve().parent / "exporter"
PACKAGE = "github.com/prometheus-community/postgres_exporter/cmd/postgres_exporter"


def build() -> Path:
    """The exporter, built first if the cache lacks it."""
    return gobuild.build(SOURCE_DIR, "postgres-exporter", what="postgres_exporter", package=PACKAGE)
