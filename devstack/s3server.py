"""An S3-compatible server on loopback, for the S3 backup store's tests and for people
who want to try it: gofakes3 (github.com/johannesboyne/gofakes3) over a bolt file, in a
small program (``s3server/``) built once per source into the devstack cache, like the
control plane. Dev and test tooling: never used in production."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from devstack import gobuild
from devstack.process import ManagedProcess

SOURCE_DIR = Path(__file__).resolve().parent / "s3server"


def build() -> Path:
    """The S3 server, built first if the cache lacks it."""
    return gobuild.build(SOURCE_DIR, "s3server", what="the S3-compatible dev server")


def _address(ready: Path) -> str | None:
    """The host:port the server wrote once listening (None until it has, whole)."""
    try:
        text = ready.read_text().strip()
    except FileNotFoundError:
        return None
    return text if text.rpartition(":")[2].isdigit() else None


@contextmanager
def serving(directory: Path, *, bucket: str, host: str = "127.0.0.1") -> Iterator[str]:
    """Serve S3 from ``directory`` with ``bucket`` in it on ``host``; yield its endpoint
    URL (``http://<host>:<port>``); stop it when the block ends, also on failure. It
    accepts any access key."""
    directory.mkdir(parents=True, exist_ok=True)
    ready = directory / "address"
    ready.unlink(missing_ok=True)
    process = ManagedProcess(
        "s3server",
        [
            str(build()),
            f"-db={directory / 's3.db'}",
            f"-bucket={bucket}",
            f"-ready-file={ready}",
            f"-listen={host}:0",
        ],
        log_path=directory / "s3server.log",
    )
    process.start()
    try:
        process.wait_until(lambda: _address(ready) is not None, what="it to listen", timeout=30)
        yield f"http://{_address(ready)}"
    finally:
        process.stop()
