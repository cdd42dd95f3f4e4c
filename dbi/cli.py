"""The ``dbi`` command-line tool.

Exit codes: 0 success, 1 the command failed, 2 bad usage, 3 no such instance,
4 the workflow refused or could not do it (status, describe, rotate, resize).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable, Coroutine
from pathlib import Path
from types import FrameType
from typing import Any

import urllib3
from kubernetes import client as k8s

from activities import kube
from dbi import environment, operate
from devstack import controlplane, orchestrator, stack, tools
from devstack.process import StackError
from watcher import __main__ as watcher_main
from workflows import worker


def main(argv: list[str] | None = None) -> int:
    """Run the ``dbi`` command line and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except StackError as e:
        print(f"dbi: {e}", file=sys.stderr)
        return 1


def build_parser() -> argparse.ArgumentParser:
    """The `dbi` command line's parser (its subcommands are what images and manifests run)."""
    parser = argparse.ArgumentParser(
        prog="dbi", description="Managed PostgreSQL instances in KubeVirt VMs, run by Temporal."
    )
    commands = parser.add_subparsers(title="commands")

    dev = commands.add_parser("dev", help="the local development stack")
    dev_commands = dev.add_subparsers(title="dev commands")
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument(
        "--state-dir",
        type=Path,
        default=stack.DEFAULT_STATE_DIR,
        help="where the stack keeps its data and logs (default: %(default)s)",
    )

    up = dev_commands.add_parser(
        "up",
        parents=[state],
        help="start the local stack and the orchestrator; Ctrl-C stops them",
        description="Build what is missing, start the local Kubernetes control plane, the VM "
        "stand-in, the Temporal dev server, the worker and the watcher, print where they "
        "are, and run until Ctrl-C.",
    )
    up.add_argument(
        "--ui-port",
        type=int,
        default=stack.DEFAULT_UI_PORT,
        help="port of the Temporal Web UI (default: %(default)s)",
    )
    up.add_argument(
        "--detach",
        action="store_true",
        help="leave the stack running in the background and return; stop it with `dbi dev down`",
    )
    up.add_argument(
        "--no-sample",
        dest="sample",
        action="store_false",
        help="do not create the sample DBInstance default/orders (deploy/samples/)",
    )
    up.set_defaults(run=_dev_up)

    down = dev_commands.add_parser(
        "down", parents=[state], help="stop a stack started with `dbi dev up --detach`"
    )
    down.set_defaults(run=_dev_down)

    worker = commands.add_parser(
        "worker",
        help="run the Temporal worker (workflow and step activities)",
        description="Host DBInstanceWorkflow and the step activities on the dbi task queue. "
        + _reads(environment.WORKER),
    )
    worker.set_defaults(run=_worker, process=environment.WORKER)

    watcher = commands.add_parser(
        "watcher",
        help="run the watcher (Kubernetes changes to workflow wake-ups)",
        description="Watch DBInstances and their children and signal each instance's "
        "workflow. " + _reads(environment.WATCHER),
    )
    watcher.set_defaults(run=_watcher, process=environment.WATCHER)

    status = commands.add_parser(
        "status",
        help="instances with phase, Ready, step and the workflow's progress",
        description="List DBInstances (one, a namespace's, or all with -A) with their "
        "phase, Ready, the step holding them and their workflow's progress.",
    )
    status.add_argument("name", nargs="?", help="one instance (default: all in the namespace)")
    _namespace_option(status)
    status.add_argument(
        "-A", "--all-namespaces", action="store_true", help="instances of every namespace"
    )
    status.set_defaults(run=_operate("status"))

    describe = commands.add_parser(
        "describe",
        help="every step's condition, reason and message, and the Temporal UI link",
        description="Show an instance's conditions (type, status, reason, message), its "
        "endpoint, its workflow's progress and the link to it in the Temporal UI.",
    )
    describe.add_argument("name", help="the DBInstance")
    _namespace_option(describe)
    describe.set_defaults(run=_operate("describe"))

    rotate = commands.add_parser(
        "rotate",
        help="rotate the app password (or --admin, dbi's) now and wait for it",
        description="Ask the instance's workflow to rotate the app password; wait until the "
        "credentials Secret holds a new password that works. With --admin, rotate dbi's own "
        "admin password instead (kept in dbi's namespace; the app notices nothing).",
    )
    rotate.add_argument("name", help="the DBInstance")
    _namespace_option(rotate)
    rotate.add_argument(
        "--admin", action="store_true", help="rotate dbi's admin password, not the app's"
    )
    rotate.set_defaults(run=_operate("rotate"))

    resize = commands.add_parser(
        "resize",
        help="apply a resize that needs a restart now (--force) and wait for it",
        description="With resizePolicy Deferred, a resize that needs a restart waits; "
        "--force asks the workflow to restart the VM now and waits until the size is synced.",
    )
    resize.add_argument("name", help="the DBInstance")
    _namespace_option(resize)
    resize.add_argument(
        "--force", action="store_true", required=True, help="allow the restart now (required)"
    )
    resize.set_defaults(run=_operate("resize"))

    bench = commands.add_parser(
        "bench",
        help="run the benchmark (python -m bench; --help there)",
        add_help=False,
    )
    bench.add_argument("arguments", nargs=argparse.REMAINDER)
    bench.set_defaults(run=_bench)

    build = dev_commands.add_parser(
        "build", help="build the control plane into the cache if its source changed"
    )
    build.set_defaults(run=_dev_build)
    return parser


def _dev_up(args: argparse.Namespace) -> int:
    started = time.monotonic()
    local = stack.LocalStack(
        state_dir=args.state_dir, ui_port=args.ui_port, detached=args.detach, orchestrator=True
    )
    # SIGTERM stops the stack as Ctrl-C does; SIGINT is handled even when the shell
    # that started us ignores it (a background job of a script).
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        info = local.start()
        sample = None
        if args.sample:
            sample = orchestrator.apply_sample(kube.connect(info.kubeconfig))
        _print_info(info, seconds=time.monotonic() - started, sample=sample)
        if args.detach:
            print("Detached: stop it with `dbi dev down`.", flush=True)
            return 0
        print("Press Ctrl-C to stop everything.", flush=True)
        while not (gone := sorted(info.pids.keys() - info.alive().keys())):
            time.sleep(1)
        print(
            f"dbi: {', '.join(gone)} stopped unexpectedly; its log is in {info.state_dir}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print("\nstopping the local stack ...", flush=True)
    finally:
        if not args.detach:
            local.stop()
    print("stopped.", flush=True)
    return 0


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _print_info(info: stack.StackInfo, *, seconds: float, sample: bool | None) -> None:
    """Where everything is, and what to try; ``sample``: created now, found, or not asked."""
    kubectl = tools.venv_tool("kubectl")
    lines = [
        f"Local stack is up in {seconds:.1f}s (state and logs in {info.state_dir}).",
        f"  Kubernetes API  {info.apiserver}",
        f"  kubeconfig      {info.kubeconfig}",
        f"  try             {kubectl} --kubeconfig {info.kubeconfig} get namespaces",
        f"                  or: export KUBECONFIG={info.kubeconfig}",
        f"  Temporal        {info.temporal_address} (namespace default)",
    ]
    if info.temporal_ui:
        lines.append(f"  Temporal UI     {info.temporal_ui}")
    lines.append(f"  VM stand-in     KubeVirt API served, guests' data in {info.state_dir}/vms")
    lines.append(f"  Orchestrator    worker and watcher running; logs in {info.state_dir}")
    for process, url in info.metrics.items():
        lines.append(f"  Metrics         {url} ({process})")
    if info.metrics:
        lines.append("  Traces          one JSON line per span in worker.log and watcher.log")
    if sample is not None:
        state = "created" if sample else "found, left as it is"
        lines.append(f"  Sample          DBInstance default/orders ({state})")
    if info.temporal_ui:
        workflow = urllib.parse.quote("dbinstance/default/orders", safe="")
        lines.append(
            f"  its workflow    {info.temporal_ui}/namespaces/default/workflows/{workflow}"
        )
    lines += [
        "",
        "Try it:",
        f"  export KUBECONFIG={info.kubeconfig}",
    ]
    if sample is None:
        lines.append(f"  {kubectl} apply -f deploy/samples/dbinstance.yaml")
    lines += [
        f"  {kubectl} wait --for=condition=Ready dbinstance/orders --timeout=180s",
        f"  {kubectl} get dbi",
        f"  psql \"$({kubectl} get secret orders-credentials -o jsonpath='{{.data.uri}}'"
        ' | base64 -d)"',
        f"  {tools.venv_tool('dbi')} describe orders     (docs/user-guide.md: every journey)",
    ]
    print("\n".join(lines), flush=True)


def _dev_down(args: argparse.Namespace) -> int:
    stopped = stack.down(args.state_dir)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running.")
    return 0


def _reads(process: environment.Process) -> str:
    return "Reads " + ", ".join(sorted(environment.read_by(process))) + " (docs/configuration.md)."


def _worker(args: argparse.Namespace) -> int:
    return _serve("worker", worker.main)


def _watcher(args: argparse.Namespace) -> int:
    return _serve("watcher", watcher_main.main)


def _serve(what: str, main: Callable[[], Coroutine[Any, Any, None]]) -> int:
    try:
        asyncio.run(main())
    except ValueError as e:  # a malformed setting; the message names the variable
        print(f"dbi: the {what} cannot start: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # the SDK reports a failed connection this way
        print(f"dbi: the {what} could not run: {e}", file=sys.stderr)
        return 1
    return 0


def _namespace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-n", "--namespace", default="default", help="the Kubernetes namespace (default: default)"
    )


def _operate(command: str) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            if command == "status":
                namespace = None if args.all_namespaces else args.namespace
                outcome = asyncio.run(operate.status(namespace, args.name))
            elif command == "rotate":
                outcome = asyncio.run(operate.rotate(args.namespace, args.name, admin=args.admin))
            else:
                outcome = asyncio.run(getattr(operate, command)(args.namespace, args.name))
        except RuntimeError as e:  # the SDK reports a failed connection this way
            print(f"dbi: Temporal: {e}", file=sys.stderr)
            return operate.FAILED
        except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            print(f"dbi: Kubernetes: {type(e).__name__}: {e}", file=sys.stderr)
            return operate.FAILED
        print(outcome.text, file=sys.stdout if outcome.code == operate.OK else sys.stderr)
        return outcome.code

    return run


def _bench(args: argparse.Namespace) -> int:
    # Imported here: the benchmark needs the dev extra (matplotlib), the rest does not.
    from bench.__main__ import main as bench_main  # noqa: PLC0415

    return bench_main(args.arguments)


def _dev_build(args: argparse.Namespace) -> int:
    print(controlplane.build())
    return 0
