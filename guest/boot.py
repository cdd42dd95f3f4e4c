"""What a boot does to the data disk before PostgreSQL starts (``prepare``): initialize
the data once (initdb with the admin role's verifier, or a backup restored), carry out
or roll back a major upgrade the document asks for, apply a reset token once, install
the document's TLS pair and dbi's ``pg_hba.conf``, and write the settings that follow
the VM's size. Each part is idempotent: a boot cut short at any point starts again.

Data is never thrown away: initdb runs only where the disk holds no data directory; a
restore unpacks beside it and moves into place only when complete; an upgrade copies
into a new directory and keeps the old one until the orchestrator deletes it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from guest import archive, files, recovery, replica, upgrade
from guest.disk import Host, conf_quote, data_major, include, initialized, pgdata, tail
from guest.document import Document

# A quiet database switches to a new WAL file after this long, so that its last write
# reaches the archive within it (and the orchestrator's next visit).
ARCHIVE_TIMEOUT_SECONDS = 300
SYSTEM_PYTHON = "/usr/bin/python3"


@dataclass(frozen=True, kw_only=True)
class Booted:
    """What a boot prepared: the data directory, the major whose binaries run it, and
    what it did (for its log line and the stand-in)."""

    pgdata: Path
    major: int
    initialized: bool = False  # initdb or a restore ran
    reset: bool = False  # a reset token was applied
    upgrade: str | None = None  # the upgrade report's phase, when this boot wrote one


@dataclass(frozen=True, kw_only=True)
class Size:
    cpus: int
    memory_bytes: int


def prepare(doc: Document, disk: Path, host: Host, *, image_major: int, size: Size) -> Booted:
    """Prepare the disk for a boot of ``image_major``'s binaries (``doc`` as the
    orchestrator wrote it); return what to boot."""
    disk.mkdir(parents=True, exist_ok=True)
    host.own(disk)
    first = not initialized(disk)
    upgraded = None
    if first and doc.replica is not None:
        replica.clone(doc, disk, host, image_major)
    elif first:
        initialize(doc, disk, host, image_major)
    elif doc.upgrade is not None:
        upgraded = upgrade.apply(doc.upgrade, doc.admin_user, disk, host, image_major)
    major = data_major(disk)
    if major > image_major or major not in host.binaries:
        raise RuntimeError(f"the data is PostgreSQL {major}; this image cannot boot it")
    reset = not first and apply_reset(doc, disk, host, major)
    configure_tls(doc, disk, host)
    configure_archiving(disk, host)
    replica.configure(doc, disk, host)
    write_size(disk, host, size)
    # What this boot wrote reaches the disk before PostgreSQL starts: a VM that loses
    # power minutes after its first boot must not find postgresql.conf half written
    # (seen on a real VM: NUL bytes where initdb --no-sync left unwritten blocks).
    os.sync()
    return Booted(
        pgdata=pgdata(disk), major=major, initialized=first, reset=reset, upgrade=upgraded
    )


# The first boot ------------------------------------------------------------------


def initialize(doc: Document, disk: Path, host: Host, major: int) -> None:
    """Run initdb with the document's admin role and verifier, or, for a document with
    ``restore``, unpack that backup and set the admin role's verifier."""
    if doc.restore is not None:
        _restore(doc, disk, host, major)
        return
    data = pgdata(disk)
    if data.exists() and any(data.iterdir()):
        # No PG_VERSION, yet files: not a cluster initdb left, and never overwritten.
        raise RuntimeError(f"{data} holds files but no PG_VERSION; not initializing over it")
    # The verifier reaches initdb through a private file, never an argument (initdb
    # stores a SCRAM verifier as it is).
    with tempfile.NamedTemporaryFile("w", dir=disk, delete=False) as pwfile:
        pwfile.write(doc.initial_password)
    pw = Path(pwfile.name)
    host.own(pw)
    try:
        ran = host.run(
            [
                host.tool(major, "initdb"),
                "-D",
                str(data),
                "-U",
                doc.admin_user,
                f"--pwfile={pw}",
                "--auth-host=scram-sha-256",
                "--auth-local=scram-sha-256",
                "-E",
                "UTF8",
            ]
        )
    finally:
        pw.unlink(missing_ok=True)
    if ran.returncode != 0:
        raise RuntimeError(f"initdb exited {ran.returncode}: " + tail(ran.stdout + ran.stderr))
    if doc.server_cert is None:  # a document before TLS (version 2)
        with (data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 0.0.0.0/0 scram-sha-256\n")
    include(data, files.VM_CONF)


def _restore(doc: Document, disk: Path, host: Host, major: int) -> None:
    """Unpack the backup's data directory and WAL, give the admin role the document's
    verifier (the backup's is its source instance's; single-user mode replays the WAL
    first), and only then move it into place: a boot cut short starts again."""
    source = doc.restore
    assert source is not None
    restoring = disk / f"{files.DATA}.restoring"
    shutil.rmtree(restoring, ignore_errors=True)
    for url, target in ((source.base_url, restoring), (source.wal_url, restoring / "pg_wal")):
        with tempfile.TemporaryFile() as tarball:
            with urllib.request.urlopen(url, timeout=60) as fetched:  # noqa: S310 (file: or https)
                shutil.copyfileobj(fetched, tarball)
            tarball.seek(0)
            with tarfile.open(fileobj=tarball) as tar:
                extract(tar, target)
    restoring.chmod(0o700)
    include(restoring, files.VM_CONF)
    fetched_wal = disk / files.RESTORE_WAL
    if source.archive_url is not None:
        archive.fetch(source.archive_url, fetched_wal)
        command = guest_command("-m guest.archive --restore", fetched_wal, "%f %p")
        recovery.recover_to(restoring, command, source.target_time, source.target_lsn)
    for path in [restoring, *restoring.rglob("*"), *fetched_wal.rglob("*")]:
        host.own(path)
    if source.archive_url is not None:
        host.own(fetched_wal)
        recovery.replay(restoring, disk, host, major)
        (restoring / files.RECOVERY_CONF).write_text("")  # recovered: nothing to replay
    set_admin_verifier(restoring, host, major, doc.admin_user, doc.initial_password)
    shutil.rmtree(fetched_wal, ignore_errors=True)
    shutil.rmtree(pgdata(disk), ignore_errors=True)
    restoring.rename(pgdata(disk))


def extract(tar: tarfile.TarFile, target: Path) -> None:
    """Unpack ``tar`` under ``target``, refusing a member that would land outside it or
    is a device: the "data" extraction filter where this Python has it (3.11.4 and
    later), the same checks by hand on older ones (Debian bookworm's is 3.11.2)."""
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(target, filter="data")
        except tarfile.TarError as e:  # a member the filter refuses, named
            raise RuntimeError(f"the backup cannot be unpacked: {e}") from e
        return
    root = target.resolve()
    members = tar.getmembers()
    for member in members:
        path = (root / member.name).resolve()
        linked = None
        if member.issym():
            linked = (path.parent / member.linkname).resolve()
        elif member.islnk():
            linked = (root / member.linkname).resolve()
        outside = not path.is_relative_to(root) or (linked and not linked.is_relative_to(root))
        if outside or member.isdev() or member.name.startswith("/"):
            raise RuntimeError(f"the backup holds {member.name!r}, outside its directory")
        member.mode &= 0o777  # no set-user or set-group bits, as the data filter does
    tar.extractall(target, members=members)  # noqa: S202 (each member checked above)


def set_admin_verifier(data: Path, host: Host, major: int, user: str, verifier: str) -> None:
    """ALTER ROLE in single-user mode (the server down)."""
    literal = verifier.replace("'", "''")
    ran = host.run(
        [host.tool(major, "postgres"), "--single", "-D", str(data), "postgres"],
        stdin=f"ALTER ROLE \"{user}\" PASSWORD '{literal}';\n",
    )
    if ran.returncode != 0:  # what it said holds no verifier: the statement is not echoed
        raise RuntimeError("setting the admin password failed: " + tail(ran.stderr))


def apply_reset(doc: Document, disk: Path, host: Host, major: int) -> bool:
    """Set the admin role's password to the document's verifier when it carries a reset
    token this data has not applied (the server down); return whether it did."""
    data = pgdata(disk)
    token, done = doc.reset, data / files.RESET_APPLIED
    if not token or doc.admin_verifier is None or doc.replica is not None:
        return False  # a standby takes the primary's roles as they replicate
    if done.exists() and done.read_text() == token:
        return False
    set_admin_verifier(data, host, major, doc.admin_user, doc.admin_verifier)
    done.write_text(token)
    host.own(done)
    return True


# Every boot ----------------------------------------------------------------------


def configure_tls(doc: Document, disk: Path, host: Host) -> None:
    """Install the document's certificate and key and dbi's pg_hba.conf. A document
    without a certificate changes nothing."""
    if doc.server_cert is None or doc.server_key is None:
        return
    data = pgdata(disk)
    written = files.tls_files(doc.server_cert, doc.server_key)
    written["pg_hba.conf"] = files.PG_HBA
    written["pg_ident.conf"] = files.pg_ident(doc.admin_user, host.login)
    spare = files.tls_files("", "", files.SLOTS[1])
    written.update({name: "" for name in spare if name != files.TLS_CONF})
    for old in data.glob("dbi-server-*"):
        if old.name not in written:
            old.unlink()
    for name, content in written.items():
        path = data / name
        path.write_text(content)
        path.chmod(0o600)
        host.own(path)
    include(data, files.TLS_CONF)  # data initialized before TLS


def write_size(disk: Path, host: Host, size: Size) -> None:
    """Write the VM's settings (included by postgresql.conf): listen on every address
    (pg_hba.conf admits TLS with SCRAM only), and what follows the VM's size, which a
    running server takes at its next reload (shared_buffers at its next start). The
    instance's spec.postgresql.parameters (postgresql.auto.conf) override them."""
    conf = pgdata(disk) / files.VM_CONF
    kib = size.memory_bytes // 1024
    conf.write_text(
        "listen_addresses = '*'\n"
        f"shared_buffers = '{kib // 4}kB'\n"
        f"effective_cache_size = '{kib * 3 // 4}kB'\n"
        f"maintenance_work_mem = '{min(kib // 16, 2 * 1024 * 1024)}kB'\n"
        f"work_mem = '{max(kib // 256, 4096)}kB'\n"
        f"max_parallel_workers = {size.cpus}\n"
        f"dbi.vm_cpus = '{size.cpus}'\n"
        f"dbi.vm_memory_bytes = '{size.memory_bytes}'\n"
    )
    host.own(conf)


def guest_command(module: str, directory: Path, placeholders: str) -> str:
    """A shell command PostgreSQL runs (``archive_command``, ``restore_command``): the
    guest program's ``module`` with the system's Python, on ``directory``."""
    package = Path(__file__).resolve().parent.parent
    return " ".join(
        [
            f"PYTHONPATH={shlex.quote(str(package))}",
            shlex.quote(_system_python()),
            module,
            shlex.quote(str(directory)),
            placeholders,
        ]
    )


def _system_python() -> str:
    """The Python PostgreSQL's user runs the archive_command with: the system's (the
    image's), else this one (a Python of its own may not be readable by that user)."""
    return SYSTEM_PYTHON if Path(SYSTEM_PYTHON).exists() else sys.executable


def configure_archiving(disk: Path, host: Host) -> None:
    """Archive each completed WAL file into the disk's spool (``guest.archive``), and
    switch to a new one after ARCHIVE_TIMEOUT of a quiet database: the orchestrator
    takes them from there while it holds the spool's lease."""
    spool = disk / files.WAL_SPOOL
    spool.mkdir(mode=0o700, exist_ok=True)
    host.own(spool)
    command = guest_command("-m guest.archive", spool, "%p %f")
    conf = pgdata(disk) / files.ARCHIVE_CONF
    conf.write_text(
        "archive_mode = on\n"
        f"archive_command = '{conf_quote(command)}'\n"
        f"archive_timeout = {ARCHIVE_TIMEOUT_SECONDS}\n"
        f"dbi.wal_spool = '{conf_quote(str(spool))}'\n"
    )
    host.own(conf)
    include(pgdata(disk), files.ARCHIVE_CONF)
