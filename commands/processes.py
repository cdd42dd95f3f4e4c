"""The processes of an install, as commands: `dbi worker`, `dbi watcher` and `dbi temporal
setup` (what the image, deploy/ and the chart run). Each loads what it runs only, when it
runs; the worker and the watcher need dbi's ``worker`` extra."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from dbi import environment
from dbi.variable import CLI, WATCHER, WORKER, Process


def add_parsers(commands: Any) -> None:
    worker = commands.add_parser(
        "worker",
        help="run the Temporal worker (workflow and step activities)",
        description="Host DBInstanceWorkflow and the step activities on the dbi task queue. "
        + _reads(WORKER),
    )
    worker.set_defaults(run=_worker, process=WORKER)

    watcher = commands.add_parser(
        "watcher",
        help="run the watcher (Kubernetes changes to workflow wake-ups)",
        description="Watch DBInstances and their children and signal each instance's "
        "workflow. " + _reads(WATCHER),
    )
    watcher.set_defaults(run=_watcher, process=WATCHER)

    temporal = commands.add_parser(
        "temporal",
        help="the Temporal side of an install (setup)",
        description="Prepare a Temporal namespace for dbi.",
    )
    temporal_commands = temporal.add_subparsers(title="commands")
    setup = temporal_commands.add_parser(
        "setup",
        help="register dbi's search attributes and check its task queue (idempotent)",
        description="Register the search attributes dbi's workflows carry on the Temporal "
        "namespace (--temporal-address and --temporal-namespace, else TEMPORAL_ADDRESS, "
        "TEMPORAL_NAMESPACE or a profile: docs/configuration.md), "
        "leaving those already there, and "
        "say whether a worker polls the task queue (DBI_TASK_QUEUE). The worker and the "
        "watcher refuse to start without the attributes. Exit 0 when the namespace is "
        "ready, 1 when it is not (a conflicting attribute, Temporal unreachable).",
    )
    setup.set_defaults(run=_temporal_setup, process=CLI)


def _temporal_setup(args: argparse.Namespace) -> int:
    from dbi import connect, temporal_setup  # noqa: PLC0415

    async def run() -> bool:
        client = await connect.temporal(args.temporal_address, namespace=args.temporal_namespace)
        return await temporal_setup.setup(
            client, environment.TASK_QUEUE.value(), lambda line: print(line, flush=True)
        )

    try:
        return 0 if asyncio.run(run()) else 1
    except RuntimeError as e:  # the SDK reports a failed connection this way
        print(f"dbi: Temporal: {e}", file=sys.stderr)
        return 1


def _reads(process: Process) -> str:
    return "Reads " + ", ".join(sorted(environment.read_by(process))) + " (docs/configuration.md)."


def _worker(args: argparse.Namespace) -> int:
    # Each process loads what it runs only: the watcher no step, psycopg or sandbox.
    try:
        from workflows import worker  # noqa: PLC0415
    except ModuleNotFoundError as e:
        return _without_extra("worker", e)
    return _serve("worker", worker.main)


def _watcher(args: argparse.Namespace) -> int:
    try:
        from watcher import __main__ as watcher_main  # noqa: PLC0415
    except ModuleNotFoundError as e:
        return _without_extra("watcher", e)
    return _serve("watcher", watcher_main.main)


def _without_extra(what: str, error: ModuleNotFoundError) -> int:
    """The processes need the ``worker`` extra; the command line alone does not."""
    print(
        f"dbi: the {what} needs dbi's worker extra (pip install 'dbi[worker]'): {error}",
        file=sys.stderr,
    )
    return 2


def _serve(what: str, main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    try:
        asyncio.run(main())
    except ValueError as e:  # a malformed setting, or Temporal not set up: the message says
        print(f"dbi: the {what} cannot start: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # the SDK reports a failed connection this way
        print(f"dbi: the {what} could not run: {e}", file=sys.stderr)
        return 1
    return 0
