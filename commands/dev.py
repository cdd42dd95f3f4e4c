"""The dev commands of ``dbi``: the local stack (``dbi dev up|down|build``) and the
benchmark (``dbi bench``).

They import devstack/ and bench/ (dev-only: the production image has neither) inside
the functions that run them, never at the top: ``dbi worker`` and ``dbi watcher`` do
not load them.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from dbi import connect

if TYPE_CHECKING:
    from devstack.stack import StackInfo


def add_parsers(commands: Any) -> None:
    """Add ``dev`` (up, down, build) and ``bench`` to the command line's subparsers."""
    dev = commands.add_parser("dev", help="the local development stack")
    dev_commands = dev.add_subparsers(title="dev commands")
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="where the stack keeps its data and logs (default: .cache/dev in the checkout)",
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
        default=None,
        help="port of the Temporal Web UI (default: 8233)",
    )
    up.add_argument(
        "--detach",
        action="store_true",
        help="leave the stack running in the background and return; stop it with `dbi dev down`",
    )
    up.add_argument(
        "--vms",
        choices=("process", "qemu"),
        default="process",
        help="how VMs boot: PostgreSQL as a process (default, fast), or real VMs on qemu "
        "from dbi's image (built first when missing; needs root, mmdebstrap and qemu)",
    )
    up.add_argument(
        "--no-sample",
        dest="sample",
        action="store_false",
        help="do not create the sample DBInstance default/orders (deploy/samples/)",
    )
    up.set_defaults(run=_stack_errors(_dev_up))

    down = dev_commands.add_parser(
        "down", parents=[state], help="stop a stack started with `dbi dev up --detach`"
    )
    down.set_defaults(run=_dev_down)

    build = dev_commands.add_parser(
        "build",
        help="build the control plane, postgres_exporter, and the tests' kstatus helper, "
        "dashboard schema check, Helm and S3 server into the cache if their source changed, "
        "and fetch the guests' PostgreSQL binaries",
    )
    build.add_argument(
        "--vm-images",
        action="store_true",
        help="also build dbi's VM images the real-VM journeys boot (as root, with the qemu "
        "image tools; a few minutes each the first time, then cached)",
    )
    build.set_defaults(run=_stack_errors(_dev_build))
    bench = commands.add_parser(
        "bench",
        help="run the benchmark (python -m bench; --help there)",
        add_help=False,
    )
    bench.add_argument("arguments", nargs=argparse.REMAINDER)
    bench.set_defaults(run=_bench)


def _stack_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report the local stack's failures (StackError) as a line and exit code 1."""

    def reporting(args: argparse.Namespace) -> int:
        from devstack.process import StackError  # noqa: PLC0415 (dev-only, lazily)

        try:
            return run(args)
        except StackError as e:
            print(f"dbi: {e}", file=sys.stderr)
            return 1

    return reporting


def _dev_up(args: argparse.Namespace) -> int:
    from devstack import orchestrator, stack  # noqa: PLC0415 (dev-only, lazily)

    started = time.monotonic()
    local = stack.LocalStack(
        state_dir=args.state_dir or stack.DEFAULT_STATE_DIR,
        ui_port=args.ui_port or stack.DEFAULT_UI_PORT,
        detached=args.detach,
        orchestrator=True,
        vms=args.vms,
    )
    # SIGTERM stops the stack as Ctrl-C does; SIGINT is handled even when the shell
    # that started us ignores it (a background job of a script).
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        info = local.start()
        sample = None
        if args.sample:
            sample = orchestrator.apply_sample(connect.kubernetes(info.kubeconfig))
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


def _print_info(info: StackInfo, *, seconds: float, sample: bool | None) -> None:
    """Where everything is, and what to try; ``sample``: created now, found, or not asked."""
    from devstack import tools  # noqa: PLC0415 (dev-only, lazily)

    kubectl = tools.venv_tool("kubectl")
    ca_file = f"{info.state_dir}/orders-ca.crt"  # the sample's CA, for psql to verify with
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
    lines.append(
        f"  VM stand-in     KubeVirt API served, VMs boot as {info.vms}, "
        f"their disks in {info.state_dir}/vms"
    )
    lines.append(f"  Orchestrator    worker and watcher running; logs in {info.state_dir}")
    if "kubelet" in info.pids:
        lines.append(
            "  Their pods      dbi-worker-dev, dbi-watcher-dev in dbi-system (Pending: their "
            "logs, not containers, for `dbi logs`)"
        )
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
        f"  export TEMPORAL_ADDRESS={info.temporal_address}",
    ]
    if sample is None:
        lines.append(f"  {kubectl} apply -f deploy/samples/dbinstance.yaml")
    real = info.vms.startswith("qemu")
    lines += [
        f"  {kubectl} wait --for=condition=Ready dbinstance/orders"
        f" --timeout={600 if real else 180}s",
        f"  {kubectl} get dbi",
        f"  {kubectl} get secret orders-credentials -o jsonpath='{{.data.ca\\.crt}}'"
        f" | base64 -d > {ca_file}",
        f"  PGSSLROOTCERT={ca_file} psql"
        f" \"$({kubectl} get secret orders-credentials -o jsonpath='{{.data.uri}}' | base64 -d)\"",
        f"  {tools.venv_tool('dbi')} describe orders     (docs/user-guide.md: every journey)",
        f"  {tools.venv_tool('dbi')} backup orders       (into {info.state_dir}/backups)",
        f"  {tools.venv_tool('dbi')} logs orders         (the worker's lines about it)",
        # The guest's exporter, through the metrics Service.
        f"  curl -s http://$({kubectl} get service orders-metrics"
        " -o jsonpath='{.spec.clusterIP}'):9187/metrics | grep '^pg_up'",
    ]
    print("\n".join(lines), flush=True)


def _dev_down(args: argparse.Namespace) -> int:
    from devstack import stack  # noqa: PLC0415 (dev-only, lazily)

    stopped = stack.down(args.state_dir or stack.DEFAULT_STATE_DIR)
    print(f"stopped: {', '.join(stopped)}" if stopped else "nothing was running.")
    return 0


def _bench(args: argparse.Namespace) -> int:
    return bench(args.arguments)


def bench(arguments: list[str]) -> int:
    """Run the benchmark with ``arguments`` (``dbi bench ...``)."""
    # Imported here: the benchmark needs the dev extra (matplotlib), the rest does not.
    from bench.__main__ import main as bench_main  # noqa: PLC0415

    return bench_main(arguments)


def _dev_build(args: argparse.Namespace) -> int:
    from devstack import (  # noqa: PLC0415 (dev-only)
        controlplane,
        dashboard,
        exporter,
        gitops,
        helm,
        postgresql,
        s3server,
    )

    print(controlplane.build())
    print(exporter.build())
    print(gitops.build())
    print(dashboard.checker())
    print(helm.build())
    print(s3server.build())
    for build in postgresql.BUILDS:  # each dev image's
        print(postgresql.install(build))
    if args.vm_images:
        _vm_images()
    return 0


def _vm_images() -> None:
    """dbi's VM images of the real-VM journeys' builds, unless this machine cannot build
    them (then it says why, and the journeys skip)."""
    from devstack import postgresql, tools  # noqa: PLC0415 (dev-only)
    from devstack.vmstandin import qemu  # noqa: PLC0415
    from images import build as images  # noqa: PLC0415
    from images.recipe import Recipe  # noqa: PLC0415

    if missing := qemu.missing_tools():
        print(f"no VM images built: {', '.join(missing)} missing", file=sys.stderr)
        return
    for build in postgresql.REAL_VM_BUILDS:
        print(images.build(Recipe(build), images.default_cache(), builds=tools.CACHE_DIR).disk)
