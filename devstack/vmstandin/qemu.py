"""The guest of a stand-in VM as a real VM: qemu boots dbi's image (``images/``).

Dev and test infrastructure, the stand-in's ``--vms qemu`` mode. It plays the part
KubeVirt's virt-launcher plays: the root disk is a copy-on-write overlay of the image
(made anew when the VM boots another image: a repave), the data disk a raw file in the
claim's volume that outlives the VM, the cloud-init Secret a NoCloud seed (vfat,
labelled CIDATA) made anew at each start, and the VM's address on the host a loopback
address whose ports 5432 and 9187 qemu forwards to the VM (user networking). Stop is
an ACPI shutdown, a crash a killed qemu, a freeze qemu's pause. Everything inside the VM
is the image's: dbi-bootstrap, PostgreSQL, the exporter.

KVM is used where its vCPUs can run (``/dev/kvm`` and the CPU's virtualization flag),
else TCG, software emulation: said in the log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from dbi import bootstrap as boot_data
from dbi.bootstrap import Bootstrap
from devstack.vmstandin.kubevirt import Size
from images import build as images
from images.recipe import EXPORTER_PORT, Recipe

log = logging.getLogger("devstack.vmstandin")

PORT = 5432
DATA_DISK = "data.img"
DATA_BYTES = 8 << 30  # sparse: a claim's size is not reflected, nor its expansion
POWER_BUTTON_SECONDS = 10.0  # how long a stop waits before it presses again
SSL_REQUEST = struct.pack("!ii", 8, 80877103)


# What the qemu mode runs on the host, beyond what building the image needs; and the
# Debian packages that bring them all.
TOOLS = ("qemu-system-x86_64", "qemu-img", "mkfs.vfat", "mcopy", "setpriv")
PACKAGES = "qemu-system-x86 qemu-utils dosfstools mtools mmdebstrap e2fsprogs extlinux"


def missing_tools() -> list[str]:
    """The programs the qemu mode needs that this machine lacks (building the image's
    among them)."""
    return [t for t in TOOLS if shutil.which(t) is None] + images.missing_tools()


def accelerator() -> str:
    """``kvm`` where a VM's vCPUs can run on it, else ``tcg``."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    usable = os.access("/dev/kvm", os.R_OK | os.W_OK) and (" vmx" in flags or " svm" in flags)
    return "kvm" if usable else "tcg"


@dataclass(frozen=True)
class Caches:
    """Where dbi's images are kept (built when missing) and the PostgreSQL builds they
    are made from."""

    images: Path
    builds: Path


class QemuGuest:
    """One VM as a qemu process; the interface of ``guest.Guest``."""

    live_resize = False  # a size change restarts the VM (KubeVirt's RestartRequired)

    def __init__(
        self,
        *,
        disk: Path,
        address: str,
        log_path: Path,
        version: str,
        caches: Caches,
        name: str = "vm",
    ) -> None:
        self.disk = disk
        self.address = address
        self.log_path = log_path
        self.name = name
        self.caches = caches
        self._qemu: subprocess.Popen[bytes] | None = None
        self.use(version)

    def use(self, version: str) -> None:
        """Boot from an overlay of ``version``'s image from now on (a repave)."""
        self.version = version
        self.recipe = Recipe(version)

    # A boot --------------------------------------------------------------------

    def prepare(self, bootstrap: Bootstrap, size: Size) -> dict[str, object]:
        """Make the VM's disks for a boot: the image (built when missing), the root
        overlay, the data disk once, and the seed from the cloud-init document. What
        the boot does inside is the image's; nothing is known of it here."""
        image = images.build(
            self.recipe, self.caches.images, builds=self.caches.builds, say=self._say
        )
        self.disk.mkdir(parents=True, exist_ok=True)
        root = self.disk / f"root-{image.directory.name}.qcow2"
        if not root.exists():
            for old in self.disk.glob("root-*.qcow2"):
                old.unlink()
            backing = ("-b", str(image.disk), "-F", "qcow2")
            _run(["qemu-img", "create", "-q", "-f", "qcow2", *backing, str(root)])
        data = self.disk / DATA_DISK
        if not data.exists():
            with data.open("wb") as f:
                f.truncate(DATA_BYTES)
        self._write_seed(bootstrap)
        self._root = root
        return {}

    def boot(self, size: Size) -> None:
        accel = accelerator()
        vcpus = size.sockets * size.cores * size.threads
        forwards = ",".join(
            f"hostfwd=tcp:{self.address}:{port}-:{port}" for port in (PORT, EXPORTER_PORT)
        )
        argv = [
            "setpriv",
            "--pdeathsig",
            "KILL",
            "qemu-system-x86_64",
            *("-accel", accel, "-smp", str(vcpus), "-m", f"{size.memory_bytes >> 20}M"),
            *("-nodefaults", "-no-user-config", "-display", "none"),
            *("-chardev", f"file,id=console,path={self.log_path},append=on"),
            *("-serial", "chardev:console"),
            *("-drive", f"file={self._root},if=virtio,format=qcow2,cache=unsafe"),
            *("-drive", f"file={self.disk / DATA_DISK},if=virtio,format=raw,cache=writeback"),
            *("-drive", f"file={self.disk / 'seed.img'},if=virtio,format=raw,readonly=on"),
            *(
                "-netdev",
                f"user,id=net0,{forwards}",
                "-device",
                "virtio-net-pci,netdev=net0,romfile=",
            ),
            *("-device", "virtio-rng-pci"),
            *("-qmp", f"unix:{self._qmp_path},server=on,wait=off"),
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._qmp_path.unlink(missing_ok=True)
        log.info("%s boots on qemu (%s, %d vCPUs) at %s", self.name, accel, vcpus, self.address)
        with (self.disk / "qemu.log").open("ab") as out:
            self._qemu = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def write_size(self, size: Size) -> None:
        """A live size change is not applied to a qemu VM (the stand-in reports it as
        RestartRequired, since ``live_resize`` is False)."""

    # What is seen from outside -------------------------------------------------

    def running(self) -> bool:
        return self._qemu is not None and self._qemu.poll() is None

    def exited(self) -> bool:
        return self._qemu is not None and self._qemu.poll() is not None

    def ready(self) -> bool:
        """Whether PostgreSQL answers in the VM: its reply to an SSLRequest (qemu's
        forwarded port accepts before anything listens in the VM)."""
        if not self.running():
            return False
        with contextlib.suppress(OSError), socket.create_connection((self.address, PORT), 2) as s:
            s.settimeout(2)
            s.sendall(SSL_REQUEST)
            return s.recv(1) == b"S"
        return False

    def rss_bytes(self) -> int:
        if not self.running():
            return 0
        assert self._qemu is not None
        with contextlib.suppress(OSError, ValueError, IndexError):
            pages = int(Path(f"/proc/{self._qemu.pid}/statm").read_text().split()[1])
            return pages * os.sysconf("SC_PAGE_SIZE")
        return 0

    # Power ---------------------------------------------------------------------

    def stop(self, *, timeout: float = 90.0) -> None:
        """An ACPI shutdown (PostgreSQL stops as systemd stops it), killed when it does
        not end in time."""
        if self._qemu is None:
            return
        if self._qemu.poll() is None:
            self._qmp("cont")  # a frozen VM, too
            deadline = time.monotonic() + timeout
            # The button again while the VM runs: a press sent just after a first or
            # an upgrade boot is sometimes lost (bench.guest_boot sees it; the cause
            # in the guest is not known).
            presses = 0
            while self._qemu.poll() is None and time.monotonic() < deadline:
                if presses:
                    log.warning("%s still runs; pressing its power button again", self.name)
                self._qmp("system_powerdown")
                presses += 1
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._qemu.wait(min(POWER_BUTTON_SECONDS, deadline - time.monotonic()))
            if self._qemu.poll() is None:
                log.warning("%s did not power off in %.0f s; killing qemu", self.name, timeout)
                os.killpg(self._qemu.pid, signal.SIGKILL)
                self._qemu.wait()
        self._qemu = None

    def crash(self) -> None:
        """The VM loses power: qemu is killed."""
        if self.running():
            assert self._qemu is not None
            os.killpg(self._qemu.pid, signal.SIGKILL)
            self._qemu.wait()

    def freeze(self) -> None:
        self._qmp("stop")

    def thaw(self) -> None:
        self._qmp("cont")

    def forget(self) -> None:
        self._qemu = None

    def destroy_disk(self) -> None:
        self.stop()
        shutil.rmtree(self.disk, ignore_errors=True)

    # Parts ---------------------------------------------------------------------

    @property
    def _qmp_path(self) -> Path:
        return self.disk / "qmp.sock"

    def _qmp(self, command: str) -> None:
        """Send one QMP command to a running qemu, ignoring one that cannot be sent."""
        if not self.running():
            return
        deadline = time.monotonic() + 5
        while not self._qmp_path.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as s:
            s.settimeout(5)
            s.connect(str(self._qmp_path))
            reader = s.makefile("rb")
            reader.readline()  # the greeting
            for execute in ("qmp_capabilities", command):
                s.sendall(json.dumps({"execute": execute}).encode() + b"\n")
                while "return" not in (reply := json.loads(reader.readline() or b"{}")):
                    if "error" in reply or not reply:
                        log.warning("qemu refused %s: %s", execute, reply)
                        return

    def _write_seed(self, bootstrap: Bootstrap) -> None:
        """The NoCloud seed: the cloud-init document as the Secret holds it, and an
        instance id that stays the VM's across boots."""
        seed = self.disk / "seed.img"
        staging = self.disk / "seed"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
        (staging / "user-data").write_text(boot_data.to_userdata(bootstrap))
        (staging / "meta-data").write_text(
            f"instance-id: {self.disk.name}\nlocal-hostname: {self.name}\n"
        )
        seed.unlink(missing_ok=True)
        _run(["mkfs.vfat", "-n", "CIDATA", "-C", str(seed), "2048"])
        _run(
            ["mcopy", "-i", str(seed), str(staging / "user-data"), str(staging / "meta-data"), "::"]
        )
        shutil.rmtree(staging)
        seed.chmod(0o600)

    def _say(self, line: str) -> None:
        log.info("image: %s", line)


def _run(argv: list[str]) -> None:
    ran = subprocess.run(argv, capture_output=True, text=True, check=False)
    if ran.returncode != 0:
        raise RuntimeError(
            f"{argv[0]} exited {ran.returncode}: {(ran.stdout + ran.stderr).strip()}"
        )
