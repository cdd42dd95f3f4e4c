"""`dbi psql NAME`: psql connected to the instance as its app role, with what its
credentials Secret holds and verify-full TLS against its CA. The password goes through a
temporary .pgpass file (mode 0600), never the command line or the environment; psql's
own arguments follow ``--``."""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.config import ConfigException

from commands import cluster
from commands.cluster import Kube, read_instance
from commands.operate import FAILED, NOT_FOUND, USAGE


def add_parser(commands: Any, cluster_options: Callable[[argparse.ArgumentParser], None]) -> None:
    parser = commands.add_parser(
        "psql",
        help="run psql connected to an instance (its Secret, verify-full TLS)",
        description="Run psql as the instance's app role, with its credentials Secret and "
        "its CA (verify-full); the password goes through a temporary .pgpass file. "
        "psql's own arguments follow --: dbi psql orders -- -c 'select 1'.",
    )
    cluster.instance_argument(parser, "the DBInstance")
    cluster_options(parser)
    parser.set_defaults(run=_command, arguments=[])


def _command(args: argparse.Namespace) -> int:
    kube = Kube.from_args(args)
    try:
        return run(kube, args.namespace or kube.namespace(), args.name, args.arguments)
    except ConfigException as e:
        print(cluster.unconfigured(kube, e), file=sys.stderr)
        return USAGE
    except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError) as e:
        print(cluster.failure(kube, e), file=sys.stderr)
        return FAILED


def run(kube: Kube, namespace: str, name: str, arguments: list[str]) -> int:
    instance = read_instance(kube, namespace, name)
    if instance is None:
        print(f"dbi: no DBInstance {namespace}/{name}", file=sys.stderr)
        return NOT_FOUND
    secret_name = (instance.get("status") or {}).get("credentialsSecretName")
    keys = _keys(kube, namespace, secret_name or f"{name}-credentials")
    if keys is None:
        print(
            f"dbi: {namespace}/{name} has no credentials Secret yet (is it Ready? "
            f"dbi describe {name} -n {namespace})",
            file=sys.stderr,
        )
        return FAILED
    psql = shutil.which("psql")
    if psql is None:
        print("dbi: psql is not on PATH (install PostgreSQL's client)", file=sys.stderr)
        return FAILED
    with tempfile.TemporaryDirectory(prefix="dbi-psql-") as scratch:
        ca = Path(scratch) / "ca.crt"
        ca.write_text(keys["ca.crt"])
        pgpass = Path(scratch) / "pgpass"
        pgpass.touch(mode=0o600)
        pgpass.write_text(keys["pgpass"])
        env = {
            **os.environ,
            "PGHOST": keys["host"],
            "PGPORT": keys["port"],
            "PGUSER": keys["user"],
            "PGDATABASE": keys["dbname"],
            "PGSSLMODE": "verify-full",
            "PGSSLROOTCERT": str(ca),
            "PGPASSFILE": str(pgpass),
            "PGAPPNAME": "dbi psql",
        }
        if "hostaddr" in keys:
            env["PGHOSTADDR"] = keys["hostaddr"]
        # Ctrl-C is psql's (it cancels the query), not a reason for dbi to go.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return subprocess.run([psql, *arguments], env=env, check=False).returncode
        finally:
            signal.signal(signal.SIGINT, previous)


def _keys(kube: Kube, namespace: str, secret: str) -> dict[str, str] | None:
    try:
        found = k8s.CoreV1Api(kube.objects().api_client).read_namespaced_secret(secret, namespace)
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise
    data = {k: base64.b64decode(v).decode() for k, v in (found.data or {}).items()}
    wanted = {"host", "port", "user", "dbname", "pgpass", "ca.crt"}
    return data if wanted <= data.keys() else None
