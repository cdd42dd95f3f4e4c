"""The ``dbi`` command-line tool.

Exit codes: 0 success, 1 the command failed, 2 bad usage, 3 no such instance,
4 the workflow refused or could not do it (status, describe, rotate, resize), 5 not
done within --timeout, 141 the reader of its output went away (``| head``). Installed
also as ``kubectl-dbi``: ``kubectl dbi status``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn

import argcomplete
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes.config import ConfigException

from commands import (
    backups,
    cluster,
    completion,
    dev,
    helptext,
    image,
    logs,
    operate,
    processes,
    psql,
    report,
    switchover,
)
from dbi import version
from dbi.fields import duration_seconds


def run() -> NoReturn:
    """The ``dbi`` console script: ``main``, then an exit that skips the interpreter's
    teardown, where the Temporal SDK's core threads can abort the process
    (temporalio/sdk-python#300: "PyGILState_Release ... Python runtime state:
    finalizing", SIGABRT). Seen once here: a finished `dbi temporal setup` exited -6."""
    try:
        try:
            code = main()
        except SystemExit as e:  # argparse's --help and usage errors
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
        except KeyboardInterrupt:  # Ctrl-C: a workflow waited for goes on with it
            print("dbi: interrupted; what was asked of a workflow goes on", file=sys.stderr)
            code = 128 + signal.SIGINT
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (`dbi describe NAME | head`): end quietly, as a tool that
        # SIGPIPE kills does, with what is left to write going nowhere.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    logging.shutdown()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    """Run the ``dbi`` command line and return its exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # its options are the benchmark's (argparse's REMAINDER
        return dev.bench(argv[1:])  # drops a leading option such as --n otherwise)
    parser = build_parser()
    argcomplete.autocomplete(parser)  # answers the shell's completion request, if one
    # What follows `--` is psql's (`dbi psql NAME -- -c ...`): argparse's subcommands
    # would take it as theirs.
    cut = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:cut])
    if cut < len(argv):
        if not hasattr(args, "arguments"):
            parser.error("arguments after -- go to `dbi psql` only")
        args.arguments = argv[cut + 1 :]
    if not hasattr(args, "run"):
        parser.print_help()
        return 2
    return int(args.run(args))


class _Version(argparse.Action):
    """``--version``: the release and its commit, looked up only when asked."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS) -> None:
        help = "print the version and the commit it was built from, and exit"
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(version.describe())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The `dbi` command line's parser (its subcommands are what images and manifests run)."""
    parser = argparse.ArgumentParser(
        prog=_prog(),
        description="Managed PostgreSQL instances in KubeVirt VMs, run by Temporal.",
        formatter_class=helptext.Grouped,
    )
    parser.add_argument("--version", action=_Version)
    _cluster_flags(parser, default=None)  # before the command, or after it (kubectl's way)
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    dev.add_parsers(commands)
    image.add_parsers(commands)
    processes.add_parsers(commands)
    completion.add_parser(commands)

    status = commands.add_parser(
        "status",
        help="instances with phase, Ready, step and the workflow's progress",
        description="List DBInstances (one, a namespace's, or all with -A) with their "
        "phase, Ready, the step holding them and their workflow's progress.",
    )
    cluster.instance_argument(status, "one instance (default: all in the namespace)", optional=True)
    _cluster_options(status, output=True)
    status.add_argument(
        "-A", "--all-namespaces", action="store_true", help="instances of every namespace"
    )
    status.set_defaults(
        run=_operate(
            lambda a: operate.status(a.kube, None if a.all_namespaces else a.namespace, a.name)
        )
    )

    describe = commands.add_parser(
        "describe",
        help="every step's condition, reason and message, and the Temporal UI link",
        description="Show an instance's conditions (type, status, reason, message), its "
        "endpoint, its workflow's progress and the link to it in the Temporal UI.",
    )
    cluster.instance_argument(describe, "the DBInstance")
    _cluster_options(describe, output=True)
    describe.set_defaults(run=_operate(lambda a: operate.describe(a.kube, a.namespace, a.name)))

    rotate = commands.add_parser(
        "rotate",
        help="rotate the app password (or --admin, dbi's) now and wait for it",
        description="Ask the instance's workflow to rotate the app password; wait until the "
        "credentials Secret holds a new password that works. With --admin, rotate dbi's own "
        "admin password instead (kept in dbi's namespace; the app notices nothing).",
    )
    cluster.instance_argument(rotate, "the DBInstance")
    _cluster_options(rotate, timeout=True)
    rotate.add_argument(
        "--admin", action="store_true", help="rotate dbi's admin password, not the app's"
    )
    rotate.set_defaults(
        run=_operate(
            lambda a: operate.rotate(a.kube, a.namespace, a.name, admin=a.admin, timeout=a.timeout)
        )
    )

    resize = commands.add_parser(
        "resize",
        help="apply a resize that needs a restart now (--force) and wait for it",
        description="With resizePolicy Deferred, a resize that needs a restart waits; "
        "--force asks the workflow to restart the VM now and waits until the size is synced.",
    )
    cluster.instance_argument(resize, "the DBInstance")
    _cluster_options(resize, timeout=True)
    resize.add_argument(
        "--force", action="store_true", required=True, help="allow the restart now (required)"
    )
    resize.set_defaults(
        run=_operate(lambda a: operate.resize(a.kube, a.namespace, a.name, timeout=a.timeout))
    )

    retry = commands.add_parser(
        "retry",
        help="run a pass now, leaving any wait (a Stalled instance's too)",
        description="Signal the instance's workflow to run a pass at once. A Stalled "
        "(Terminal) instance waits for a new generation; after fixing what the reason names "
        "outside the spec (an image created, a quota raised), retry it. The same as the "
        "annotation dbi.dev/reconcile-requested-at.",
    )
    cluster.instance_argument(retry, "the DBInstance")
    _cluster_options(retry)
    retry.set_defaults(run=_operate(lambda a: operate.retry(a.kube, a.namespace, a.name)))

    backup = commands.add_parser(
        "backup",
        help="take a backup of an instance now and wait for it",
        description="Start a backup of the instance (pg_basebackup and its WAL, into the "
        "orchestrator's backup store) now, outside its schedule; show its progress and wait "
        "until it is Completed or Failed. It is recorded as a DBBackup (dbi backups NAME).",
    )
    cluster.instance_argument(backup, "the DBInstance")
    _cluster_options(backup, output=True, timeout=True)
    backup.set_defaults(
        run=_operate(lambda a: backups.backup(a.kube, a.namespace, a.name, timeout=a.timeout))
    )

    switch = commands.add_parser(
        "switchover",
        help="make another member of an instance the primary, and wait",
        description="Ask an instance with replicas (spec.instances) to switch over: the "
        "primary restarts as a replica, the target, once caught up, is promoted. Writes "
        "dbi.dev/switchover-to and dbi.dev/switchover-requested-at; waits until served.",
    )
    cluster.instance_argument(switch, "the DBInstance")
    switch.add_argument("--to", help="the member to promote (default: the most caught up)")
    _cluster_options(switch, timeout=True)
    switch.set_defaults(
        run=_operate(
            lambda a: switchover.switchover(a.kube, a.namespace, a.name, to=a.to, timeout=a.timeout)
        )
    )

    listing = commands.add_parser(
        "backups",
        help="list backups (DBBackups), oldest first",
        description="List the DBBackups of an instance, or of every instance: phase, "
        "trigger, size, PostgreSQL version, when each started and finished, and why one "
        "failed. They outlive the instance.",
    )
    cluster.instance_argument(listing, "the DBInstance (it may be deleted)", optional=True)
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="backups of every namespace"
    )
    _cluster_options(listing, output=True)
    listing.set_defaults(
        run=_operate(
            lambda a: backups.listing(a.kube, None if a.all_namespaces else a.namespace, a.name)
        )
    )

    psql.add_parser(commands, _cluster_options)
    logs.add_parser(commands, _cluster_options, _operate)
    report.add_parser(commands, _cluster_options, _operate)

    return parser


def _prog() -> str:
    """``dbi``, or ``kubectl dbi`` when run as kubectl's plugin (``kubectl-dbi``)."""
    name = Path(sys.argv[0]).name
    return "kubectl dbi" if name.startswith("kubectl-dbi") else "dbi"


def _cluster_flags(parser: argparse.ArgumentParser, *, default: Any) -> None:
    parser.add_argument(
        "-n",
        "--namespace",
        default=default,
        help="the Kubernetes namespace (default: the context's, else default)",
    )
    parser.add_argument(
        "--kubeconfig", default=default, help="the kubeconfig file (default: $KUBECONFIG)"
    )
    parser.add_argument(
        "--context", default=default, help="the kubeconfig context (default: its current one)"
    )
    parser.add_argument(
        "--temporal-address",
        default=default,
        help="Temporal's host:port (default: TEMPORAL_ADDRESS or the Temporal profile, else "
        "what the cluster's install records in --dbi-namespace, else 127.0.0.1:7233)",
    )
    parser.add_argument(
        "--temporal-namespace",
        default=default,
        help="the Temporal namespace (default: as the address, else default)",
    )
    parser.add_argument(
        "--dbi-namespace",
        default=default,
        help="the namespace dbi is installed in, whose record of Temporal's address a "
        "command reads when nothing else gives one (default: dbi-system)",
    )


def _cluster_options(
    parser: argparse.ArgumentParser, *, output: bool = False, timeout: bool = False
) -> None:
    """kubectl's options for the cluster and the namespace (and, where asked, -o and
    --timeout), after the subcommand as kubectl users write them."""
    _cluster_flags(parser, default=argparse.SUPPRESS)  # not given: the main parser's
    if output:
        parser.add_argument(
            "-o", "--output", choices=("json", "yaml"), help="print the answer as JSON or YAML"
        )
    if timeout:
        parser.add_argument(
            "--timeout",
            type=_duration,
            help="stop waiting after this long, such as 30s or 5m (exit 5; the workflow "
            "goes on with it); default: wait until done",
        )


def _duration(value: str) -> float:
    try:
        return duration_seconds(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _operate(
    command: Callable[[argparse.Namespace], Coroutine[Any, Any, operate.Answer]],
) -> Callable[[argparse.Namespace], int]:
    """Return what runs an operator command: its answer printed (as text, or as JSON or
    YAML with -o), its code returned."""

    def run(args: argparse.Namespace) -> int:
        args.kube = cluster.Kube.from_args(args)
        try:
            args.namespace = args.namespace or args.kube.namespace()
            answer = asyncio.run(command(args))
        except ConfigException as e:
            print(cluster.unconfigured(args.kube, e), file=sys.stderr)
            return operate.USAGE
        except RuntimeError as e:  # the SDK reports a failed connection this way
            print(f"dbi: Temporal: {e}", file=sys.stderr)
            return operate.FAILED
        except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
            print(cluster.failure(args.kube, e), file=sys.stderr)
            return operate.FAILED
        output = getattr(args, "output", None)
        if answer.data is not None and output == "json":
            text = json.dumps(answer.data, indent=2)
        elif answer.data is not None and output == "yaml":
            text = yaml.safe_dump(answer.data, sort_keys=False).rstrip()
        else:
            text = answer.text
        shown = answer.code == operate.OK or answer.data is not None
        print(text, file=sys.stdout if shown else sys.stderr)
        if answer.warning:
            print(answer.warning, file=sys.stderr)
        return answer.code

    return run
