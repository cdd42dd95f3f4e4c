"""take_backup: one physical base backup of a running instance, into the backup store.

``pg_basebackup`` (tar format, gzip, the WAL streamed alongside so the backup is
consistent by itself) runs in the worker against the instance's PostgreSQL over the
same verified TLS as dbi's other connections, as dbi's admin role (PGPASSWORD in the
child's environment only, never an argument). Its files go to a private temporary
directory, where ``pg_verifybackup`` checks every file against the checksums of
pg_basebackup's own backup_manifest, then to the store; the manifest
(``backupstore.MANIFEST``) goes last, so a backup in the store is complete or is no
backup. Each attempt uploads under a key of its own (``<backup>/<attempt>/``) and the
manifest names the files of the attempt that wrote it, whose writing first removes
what earlier attempts left: a lost worker's pg_basebackup, still uploading, never
mixes its files into another attempt's backup.

First, when the instance has ``spec.backup``, it renews the guest's lease on WAL
archiving (``walarchive.lease``): the WAL from the backup's start on is kept for the
archiver even before the archiver's first visit, so the backup restores to a point.

It runs on the long task queue (``dbi.pipeline.LONG``), never in a step's slot. Its
scratch space is bounded (``DBI_BACKUP_SCRATCH_LIMIT``: a backup that needs more ends,
``BackupScratchFull``, before the worker's disk fills), its connection has TCP
keepalives and a user timeout (a vanished network ends it), and a pg_basebackup that
writes nothing for ``STALL_SECONDS`` is stopped (``BackupStalled``, retried): the
heartbeat says how much was written, and the activity does not heartbeat a stall for
hours.
"""

from __future__ import annotations

import contextlib
import functools
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from psycopg.conninfo import make_conninfo
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.infra import addresses, admin_credential, backupstore, heartbeats, postgres, trust
from activities.infra.context import Activity, Context
from activities.infra.kube import Instance
from activities.operations import walarchive
from dbi import backups, pipeline
from dbi.backups import Reason, Taken, WalRange
from dbi.config import ADMIN_USER

HEARTBEAT_SECONDS = 2.0
# A pg_basebackup that wrote nothing for this long (its server hung, its network lost
# without a reset) is stopped; its fast checkpoint, before the first byte, is within it.
STALL_SECONDS = 300.0
# What pg_basebackup says when the server's pg_hba.conf has no replication entry: an
# instance that booted before backups existed (its next boot writes the entry).
_NO_REPLICATION_ENTRY = "no pg_hba.conf entry for replication connection"


class TakeBackup(Activity):
    @activity.defn(name=pipeline.TAKE_BACKUP)
    def run(self, begun: backups.Begun, request: backups.BackupRequest) -> Taken:
        """Take the backup ``begun`` recorded, or return the one already in the store."""
        instance = self.ctx.kube.instance(request.namespace, request.name)
        if instance is None or instance.uid != begun.uid or begun.backup is None:
            raise ApplicationError(
                "the instance is gone", type=Reason.INSTANCE_GONE, non_retryable=True
            )
        return take(self.ctx, instance, begun.backup)


def take(ctx: Context, instance: Instance, backup: str) -> Taken:
    """Take ``backup`` of ``instance`` into the store; idempotent on the manifest. A
    failed request to the store is ``BackupStoreFailed``, in dbi's words only."""
    try:
        store = backupstore.for_instance(ctx.kube, ctx.config, instance)
    except ValueError as e:
        raise ApplicationError(str(e), type=Reason.NO_STORE, non_retryable=True) from None
    try:
        return _take(ctx, instance, store, backup)
    except backupstore.StoreFailed as e:
        raise ApplicationError(str(e), type=Reason.STORE_FAILED, non_retryable=e.refused) from None


def _take(ctx: Context, instance: Instance, store: backupstore.Store, backup: str) -> Taken:
    prefix = backups.store_prefix(instance.namespace, instance.name, backup)
    done = store.read(prefix + backupstore.MANIFEST)
    if done is not None:
        return Taken.model_validate_json(done)
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None:
        raise ApplicationError(
            "the instance is not running; start it to back it up",
            type=Reason.NOT_RUNNING,
            non_retryable=True,
        )
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    password = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid).password
    with postgres.connect(server, password=password) as conn:
        row = conn.execute(
            "SELECT current_setting('server_version'), system_identifier::text "
            "FROM pg_control_system()"
        ).fetchone()
        if instance.model.spec.backup is not None:
            walarchive.lease(conn)  # its WAL is kept from its start, archiver or not yet
    version = str(row[0]).split(" ")[0] if row else ""
    attempt = f"{activity.info().attempt}/"
    with _scratch(backup) as tmp:
        target = tmp / "files"
        _pg_basebackup(ctx, server, password, target, label=backup)
        heartbeats.working("verifying the backup", functools.partial(verify, ctx, target))
        files = sorted(p.name for p in target.iterdir() if p.is_file())
        for i, name in enumerate(files):
            what = f"uploading {name} ({i + 1}/{len(files)})"
            key = prefix + attempt + name
            heartbeats.working(what, functools.partial(store.upload, key, target / name))
        taken = Taken(
            backup=backup,
            size_bytes=sum((target / name).stat().st_size for name in files),
            postgres_version=version,
            wal=wal_range(json.loads((target / "backup_manifest").read_text())),
            location=store.location.url() + prefix,
            files=[attempt + name for name in files],
            store=backupstore.ref_of(backupstore.target_of(instance)),
            instance_uid=instance.uid,
            system_identifier=str(row[1]) if row else None,
        )
    complete(store, prefix, taken)
    return taken


def complete(store: backupstore.Store, prefix: str, taken: Taken) -> None:
    """Make ``taken`` the backup at ``prefix``: remove what other attempts uploaded
    there, then write its manifest (last: a backup with a manifest is whole)."""
    kept = {prefix + key for key in taken.files}
    attempts = {
        key[len(prefix) :].split("/", 1)[0]
        for key in store.keys(prefix)
        if key not in kept and "/" in key[len(prefix) :]
    }
    for other in sorted(attempts):
        store.delete(f"{prefix}{other}/")
    store.write(prefix + backupstore.MANIFEST, taken.model_dump_json(indent=2).encode())


@contextlib.contextmanager
def _scratch(backup: str) -> Iterator[Path]:
    """A private directory for this attempt's files, removed after. Named after the
    backup and the attempt: an attempt clears what earlier ones of the same backup left
    on this host (a worker killed mid-backup removes nothing; its pg_basebackup, orphaned,
    may still be writing there until it notices)."""
    base = Path(tempfile.gettempdir())
    for earlier in base.glob(f"dbi-backup-{backup}-*"):
        shutil.rmtree(earlier, ignore_errors=True)
    path = base / f"dbi-backup-{backup}-{activity.info().attempt}"
    path.mkdir(mode=0o700)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def wal_range(manifest: dict[str, object]) -> WalRange:
    """The WAL range a backup_manifest names (its first and last range, one timeline on a
    primary)."""
    ranges = manifest.get("WAL-Ranges")
    if not isinstance(ranges, list) or not ranges:
        raise ValueError("backup_manifest names no WAL-Ranges")
    first, last = ranges[0], ranges[-1]
    return WalRange(start=first["Start-LSN"], end=last["End-LSN"], timeline=last["Timeline"])


def pg_basebackup(ctx: Context) -> str:
    """The pg_basebackup to run: DBI_PG_BIN_DIR's, else PATH's (``shutil.which``)."""
    found = shutil.which("pg_basebackup", path=ctx.config.pg_bin_dir)
    if found is None:
        raise ApplicationError(
            "pg_basebackup is not installed in the worker (set DBI_PG_BIN_DIR)",
            type=Reason.NO_PG_BASEBACKUP,
            non_retryable=True,
        )
    return found


def verify(ctx: Context, target: Path) -> None:
    """Check every file pg_basebackup wrote against its backup_manifest's checksums
    (``pg_verifybackup``; the WAL is not parsed, as pg_waldump reads no tar): a backup
    damaged on the way to the worker's disk is taken again, never uploaded."""
    tool = shutil.which("pg_verifybackup", path=ctx.config.pg_bin_dir)
    if tool is None:
        raise ApplicationError(
            "pg_verifybackup is not installed in the worker (set DBI_PG_BIN_DIR)",
            type=Reason.NO_PG_BASEBACKUP,
            non_retryable=True,
        )
    ran = subprocess.run(
        [tool, "--format=tar", "--no-parse-wal", "--quiet", str(target)],
        capture_output=True,
        text=True,
        env={},
        check=False,
    )
    if ran.returncode != 0:
        said = (ran.stderr or ran.stdout).strip().splitlines()
        first = next((line for line in said if "error:" in line), said[0] if said else "")
        raise ApplicationError(
            f"pg_verifybackup found the backup damaged: {first}"[:512],
            type=Reason.VERIFY_FAILED,
        )


def conninfo(server: postgres.Server) -> str:
    """How pg_basebackup reaches the instance: as dbi's own connections do (verified TLS,
    SCRAM bound to it: ``postgres.AUTH``), as the admin; the password goes in the
    child's environment."""
    return make_conninfo(
        host=server.name,
        hostaddr=server.address,
        port=postgres.PORT,
        user=ADMIN_USER,
        sslmode="verify-full",
        sslrootcert=server.ca_file or "/nonexistent/dbi-no-ca.crt",
        connect_timeout=postgres.CONNECT_TIMEOUT_SECONDS,
        application_name="dbi-backup",
        keepalives=1,
        keepalives_idle=10,
        keepalives_interval=5,
        keepalives_count=3,
        tcp_user_timeout=postgres.TCP_USER_TIMEOUT_MS,
        **postgres.AUTH,
    )


def _pg_basebackup(
    ctx: Context, server: postgres.Server, password: str, target: Path, *, label: str
) -> None:
    """Run pg_basebackup into ``target``, heartbeating; raise what it said on failure."""
    command = [
        pg_basebackup(ctx),
        f"--pgdata={target}",
        "--format=tar",
        "--compress=gzip:1",
        "--wal-method=stream",
        "--checkpoint=fast",
        "--no-password",
        f"--label={label}",
        f"--dbname={conninfo(server)}",
        *([f"--max-rate={ctx.config.backup_max_rate}"] if ctx.config.backup_max_rate else []),
    ]
    # The child's whole environment: the password and nothing of the worker's.
    env = {"PGPASSWORD": password}
    with tempfile.TemporaryFile() as said:
        proc = subprocess.Popen(command, stdout=said, stderr=said, env=env)
        try:
            _watch(proc, target, limit=ctx.config.backup_scratch_bytes)
        finally:
            if proc.poll() is None:  # stopped by _watch, cancelled, or the worker stops
                proc.kill()
                proc.wait()
        said.seek(0)
        output = said.read().decode(errors="replace").strip()
    if proc.returncode != 0:
        # Its first error says why; its last line is often only "removing data directory".
        lines = output.splitlines()
        last = next((line for line in lines if "error:" in line), lines[-1] if lines else "")
        if _NO_REPLICATION_ENTRY in output:
            raise ApplicationError(
                "the instance's pg_hba.conf predates backups; restart it once "
                "(dbi resize NAME --force) to take the one that allows them",
                type=Reason.REPLICATION_REFUSED,
                non_retryable=True,
            )
        raise ApplicationError(
            f"pg_basebackup exited {proc.returncode}: {last}"[:512],
            type=Reason.PG_BASEBACKUP_FAILED,
        )


def _watch(proc: subprocess.Popen[bytes], target: Path, *, limit: int) -> None:
    """Heartbeat what pg_basebackup wrote until it exits; raise (it is then killed) when
    it writes more than ``limit`` bytes or nothing for ``STALL_SECONDS``."""
    written, progressed = 0, time.monotonic()
    while True:
        exited = proc.poll() is not None
        now_written = _written(target)
        if now_written > written:
            written, progressed = now_written, time.monotonic()
        if written > limit:
            raise ApplicationError(
                f"The backup needs more than the worker's scratch limit of {limit // 2**20} "
                "MiB (DBI_BACKUP_SCRATCH_LIMIT); the operator can raise it.",
                type=Reason.SCRATCH_FULL,
                non_retryable=True,
            )
        if exited:
            return
        idle = time.monotonic() - progressed
        if idle > STALL_SECONDS:
            raise ApplicationError(
                f"pg_basebackup received nothing for {idle:.0f} s; stopped, to be retried.",
                type=Reason.STALLED,
            )
        activity.heartbeat(f"pg_basebackup: {written // 2**20} MiB written")
        time.sleep(HEARTBEAT_SECONDS)


def _written(target: Path) -> int:
    if not target.exists():
        return 0
    return sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
