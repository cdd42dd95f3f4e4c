"""Point-in-time recovery on a local stack: ``python -m bench.pitr [--size 1024] [--rate 1]
[--load 300] [--out bench-results]``.

One instance with ``spec.backup`` (``archiveTimeout`` 30 s), under ``dbi worker`` and
``dbi watcher`` as processes, its WAL archived by the worker's archiver (a run a
minute) into the stack's store:

- **base backup**: ``--size`` MiB of table data, then ``dbi backup``: its time.
- **recovery point**: a steady load of ``--rate`` MiB/s of rows for ``--load`` seconds;
  every 5 s, the committed work the store does not hold yet, in seconds (since the
  instance wrote past the end of the newest stored segment) and in MiB. Median and max.
- **archive throughput**: ``--size`` MiB of WAL written at once, then one archiver run
  asked for (as ``temporal schedule trigger`` does): MiB/s from the ask until the store
  holds every segment the burst completed.
- **restore**: a new instance restored to the LSN of the burst's last commit (the base
  backup plus all the WAL after it, about ``--size`` MiB and the load's): time from
  apply to Ready, and its rows checked.

Progress goes to stderr; the figures to ``--out``/pitr.json and stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import psycopg
from kubernetes import client as k8s
from psycopg import sql
from temporalio.client import Client

from activities.infra.trust import trust_file
from bench import measure
from dbi import connect, environment, names, wal
from devstack import tools
from devstack.stack import LocalStack, StackInfo

NAMESPACE = "bench"
MIB = 2**20
SPEC: dict[str, Any] = {
    "version": 18,
    "resources": {"cpu": 1, "memory": "1Gi", "storage": "20Gi"},
    "healthCheckInterval": "30s",
    "backup": {"schedule": "0 3 1 1 *", "archiveTimeout": "30s"},
}


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def until(check: Callable[[], Any], what: str, timeout: float, said: Sequence[str] = ()) -> Any:
    """``check()``'s first truthy answer; progress every 10 s (with what ``said`` holds
    then: the instance's Ready condition); past ``timeout``, stop."""
    started = last = time.monotonic()
    while not (found := check()):
        now = time.monotonic()
        if now - started > timeout:
            raise SystemExit(f"bench.pitr: {what}: not within {timeout:.0f}s ({' '.join(said)})")
        if now - last >= 10:
            say(f"  waiting for {what}: {now - started:.0f}s {' '.join(said)}")
            last = now
        time.sleep(1)
    return found


class Bench:
    def __init__(self, info: StackInfo, timeout: float) -> None:
        self.info = info
        self.timeout = timeout
        self.api = connect.kubernetes(info.kubeconfig)
        self.objects = k8s.CustomObjectsApi(self.api)
        self.store = Path(info.state_dir) / "backups"

    def apply(self, name: str, spec: dict[str, Any]) -> None:
        body = {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }
        self.objects.create_namespaced_custom_object(
            names.GROUP, names.VERSION, NAMESPACE, names.PLURAL, body
        )

    def get(self, name: str) -> dict[str, Any]:
        return cast(
            dict[str, Any],
            self.objects.get_namespaced_custom_object(
                names.GROUP, names.VERSION, NAMESPACE, names.PLURAL, name
            ),
        )

    def ready(self, name: str) -> float:
        """Wait until ``name`` is Ready for its generation; return the seconds waited."""

        said: list[str] = []

        def check() -> bool:
            db = self.get(name)
            status = db.get("status") or {}
            held = {c["type"]: c for c in status.get("conditions", [])}
            current = status.get("observedGeneration") == db["metadata"]["generation"]
            ready = held.get("Ready") or {}
            said[:] = [f"{ready.get('reason')}: {ready.get('message')}"]
            return current and ready.get("status") == "True"

        started = time.monotonic()
        until(check, f"{name} Ready", self.timeout, said)
        return time.monotonic() - started

    def connect(self, name: str) -> psycopg.Connection[Any]:
        secret = k8s.CoreV1Api(self.api).read_namespaced_secret(f"{name}-credentials", NAMESPACE)
        data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
        root = trust_file(data["ca.crt"])
        return psycopg.connect(f"{data['uri']}&sslrootcert={root}", autocommit=True)

    def stored(self, name: str = "db") -> list[wal.Segment]:
        """The WAL segments of ``name`` the store holds, oldest first."""
        uid = self.get(name)["metadata"]["uid"]
        base = self.store / NAMESPACE / name / "_wal" / uid
        found = []
        for path in base.glob("*/*.gz") if base.is_dir() else []:
            segment = wal.segment(path.name.removesuffix(".gz"))
            if segment is not None:
                found.append(segment)
        return sorted(found, key=lambda s: s.number)

    def archived_to(self) -> int:
        """The LSN up to which the store holds the WAL: the end of its newest segment."""
        segments = self.stored()
        return (segments[-1].number + 1) * wal.SEGMENT_BYTES if segments else 0

    def dbi(self, *args: str) -> str:
        env = {
            **os.environ,
            "KUBECONFIG": self.info.kubeconfig,
            "TEMPORAL_ADDRESS": self.info.temporal_address,
        }
        done = subprocess.run(
            [str(tools.venv_tool("dbi")), *args],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=self.timeout,
        )
        if done.returncode != 0:
            raise SystemExit(f"bench.pitr: dbi {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    async def archive_now(self) -> None:
        """Ask the archiver's Schedule for a run now."""
        client = await Client.connect(self.info.temporal_address)
        schedule = names.wal_archiver_schedule_id(environment.TASK_QUEUE.value())
        await client.get_schedule_handle(schedule).trigger()


class Cpu:
    """CPU-seconds the stack's processes (and their children: the guests' PostgreSQL,
    pg_basebackup) use between two calls of ``since``: all of them, and the worker's."""

    def __init__(self, info: StackInfo) -> None:
        self.roots = info.pids
        self.last = measure.cpu_by_part(self.roots)

    def since(self) -> dict[str, float]:
        now = measure.cpu_by_part(self.roots)
        used = {key: now[key] - self.last.get(key, 0.0) for key in now}
        self.last = now
        worker = sum(v for key, v in used.items() if key.startswith("worker"))
        return {"cpu_s": round(sum(used.values()), 1), "worker_cpu_s": round(worker, 1)}


def lsn(conn: psycopg.Connection[Any]) -> int:
    (at,) = cast(tuple[str], conn.execute("SELECT pg_current_wal_lsn()::text").fetchone())
    return wal.lsn_value(at)


def write(conn: psycopg.Connection[Any], table: str, mib: float) -> None:
    """About ``mib`` MiB of rows of 1 KiB (md5 text: of little use to compression), and so a
    little more WAL, in one commit."""
    insert = sql.SQL(
        "INSERT INTO {} SELECT g, repeat(md5(random()::text), 32) FROM generate_series(1, %s) g"
    )
    conn.execute(insert.format(sql.Identifier(table)), (max(1, int(mib * 1024)),))


def recovery_point(
    bench: Bench, conn: psycopg.Connection[Any], rate: float, seconds: float
) -> dict[str, Any]:
    """A steady load of ``rate`` MiB/s of rows; every 5 s, what the store does not hold yet."""
    written: list[tuple[float, int]] = []  # (when, LSN after a commit)
    stop = threading.Event()

    def load() -> None:
        # Paced by the rows it writes, not by the WAL: autovacuum's and archive_timeout's
        # WAL would eat the budget.
        started, sent = time.monotonic(), 0.0
        while not stop.is_set():
            due = rate * (time.monotonic() - started) - sent
            if due > 0:
                chunk = max(min(due, rate / 10), 1 / 1024)
                write(conn, "load", chunk)
                sent += chunk
                written.append((time.monotonic(), lsn(conn)))
            else:
                time.sleep(0.05)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    samples: list[tuple[float, float]] = []  # (seconds of work, MiB of WAL) not in the store
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            time.sleep(5)
            now, archived = time.monotonic(), bench.archived_to()
            if not written:
                continue
            past = [t for t, at in written if at > archived]
            behind_s = now - past[0] if past else 0.0
            samples.append((behind_s, max(0, written[-1][1] - archived) / MIB))
            say(
                f"  {now - started:4.0f}s  not yet archived: {behind_s:5.1f} s of work, "
                f"{samples[-1][1]:6.1f} MiB"
            )
    finally:
        stop.set()
        loader.join()
    wal_rate = (written[-1][1] - written[0][1]) / MIB / (written[-1][0] - written[0][0])
    seconds_behind = [s for s, _ in samples]
    mib_behind = [m for _, m in samples]
    return {
        "load_mib_per_s": rate,
        "wal_mib_per_s": round(wal_rate, 2),
        "behind_s_median": round(statistics.median(seconds_behind), 1),
        "behind_s_max": round(max(seconds_behind), 1),
        "behind_mib_median": round(statistics.median(mib_behind), 1),
        "behind_mib_max": round(max(mib_behind), 1),
        "samples": len(samples),
    }


def run(args: argparse.Namespace, state_dir: Path) -> dict[str, Any]:
    with LocalStack(state_dir=state_dir, orchestrator=True) as info:
        bench = Bench(info, args.timeout)
        core = k8s.CoreV1Api(bench.api)
        core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=NAMESPACE)))
        say("an instance with spec.backup: until Ready")
        bench.apply("db", SPEC)
        bench.ready("db")
        figures: dict[str, Any] = {"size_mib": args.size}
        with bench.connect("db") as conn:
            conn.execute(b"CREATE TABLE base (id bigint, pad text)")
            conn.execute(b"CREATE TABLE load (id bigint, pad text)")
            say(f"base: {args.size} MiB of rows")
            for _ in range(max(1, args.size // 64)):
                write(conn, "base", min(64, args.size))
            # Now, not under the load: the first vacuum of the new pages writes about as
            # much WAL again (a full page image each: data checksums are on).
            conn.execute(b"VACUUM base")
            say("base backup: dbi backup db")
            begun = lsn(conn)
            cpu = Cpu(info)
            started = time.monotonic()
            bench.dbi("backup", "db", "-n", NAMESPACE, "-o", "json")
            figures["backup"] = {"s": round(time.monotonic() - started, 1), **cpu.since()}
            # The window starts with the archive caught up: the base's WAL stored.
            backlog = lsn(conn) // wal.SEGMENT_BYTES * wal.SEGMENT_BYTES
            until(lambda: bench.archived_to() >= backlog, "the base's WAL stored", args.timeout)
            say(f"recovery point: {args.rate} MiB/s of rows for {args.load:.0f}s")
            figures["recovery_point"] = recovery_point(bench, conn, args.rate, args.load)
            say(f"archive throughput: {args.size} MiB of WAL at once")
            first = lsn(conn)
            for _ in range(max(1, args.size // 64)):
                write(conn, "load", min(64, args.size))
            last = lsn(conn)
            (rows,) = cast(tuple[int], conn.execute(b"SELECT count(*) FROM load").fetchone())
        complete = last // wal.SEGMENT_BYTES * wal.SEGMENT_BYTES  # the burst's last full one
        cpu.since()
        asked = time.monotonic()
        asyncio.run(bench.archive_now())
        until(lambda: bench.archived_to() >= complete, "the burst's WAL stored", args.timeout)
        took = time.monotonic() - asked
        figures["archive"] = {
            "mib": round((complete - first) / MIB),
            "s": round(took, 1),
            "mib_per_s": round((complete - first) / MIB / took, 1),
            **cpu.since(),
        }
        say(f"  {figures['archive']}")
        # The burst's last segment completes at archiveTimeout; the next run stores it.
        until(lambda: bench.archived_to() > last, "the last segment stored", args.timeout)
        figures["restore"], figures["restored_rows"] = restore(bench, cpu, last, begun, rows)
        return figures


def restore(bench: Bench, cpu: Cpu, last: int, begun: int, rows: int) -> tuple[dict[str, Any], int]:
    """Restore a new instance from db to LSN ``last``; its figures, and its rows checked
    against ``rows``."""
    target = f"{last >> 32:X}/{last & 0xFFFFFFFF:X}"
    say(f"restore: a new instance to LSN {target}")
    spec = {key: value for key, value in SPEC.items() if key != "backup"}
    cpu.since()
    bench.apply("back", {**spec, "restore": {"from": {"instance": "db"}, "lsn": target}})
    took = bench.ready("back")
    figures = {
        "s": round(took, 1),
        "wal_mib": round((last - begun) / MIB),  # replayed after the base
        **cpu.since(),
    }
    with bench.connect("back") as conn:
        (got,) = cast(tuple[int], conn.execute(b"SELECT count(*) FROM load").fetchone())
    if got != rows:
        raise SystemExit(f"bench.pitr: the restore holds {got} rows of load, not {rows}")
    return figures, got


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)  # the stack stops and its data goes
    parser = argparse.ArgumentParser(
        prog="python -m bench.pitr", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--size", type=int, default=1024, help="MiB of base and of WAL burst")
    parser.add_argument("--rate", type=float, default=1.0, help="steady load, MiB/s of rows")
    parser.add_argument("--load", type=float, default=300, help="steady load's length, s")
    parser.add_argument("--timeout", type=float, default=1800, help="per wait, s")
    parser.add_argument("--out", type=Path, default=Path("bench-results"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dbi-bench-pitr-") as tmp:
        try:
            figures = run(args, Path(tmp) / "stack")
        finally:
            shutil.rmtree(Path(tmp) / "stack", ignore_errors=True)
    text = json.dumps(figures, indent=2)
    (args.out / "pitr.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
