"""The orchestrator's configuration, from the environment.

- ``DBI_IMAGES``: a JSON object of PostgreSQL major version to VirtualMachineImage
  ``namespace/name`` (default: each supported version to ``dbi-images/postgres-<v>``).
- ``DBI_EXPORTER_PORT``: the PostgreSQL exporter's port in the VM (default 9187).
- ``DBI_NAMESPACE``: the orchestrator's own namespace, where it keeps each instance's
  admin credential (default ``dbi-system``).
- ``DBI_ADMIN_ROTATION_INTERVAL``: how often the admin password is rotated (default
  ``720h``; ``0``: never on a schedule).
- ``DBI_TLS_CERT_LIFETIME``: how long an instance's TLS server certificate is valid
  (default ``2160h``, 90 days); it is renewed with a third of it left.
- ``DBI_BACKUP_STORE``, ``DBI_BACKUP_S3_ENDPOINT``, ``DBI_PG_BIN_DIR``: where backups
  go and the ``pg_basebackup`` that takes them (docs/configuration.md).
- ``DBI_BACKUP_ALLOWED_NETWORKS``: the networks beyond public addresses a tenant's
  backup endpoint may reach; ``DBI_BACKUP_SCRATCH_LIMIT``: what one backup may stage.
- ``DBI_CONNECT_HOSTADDR``: ``1`` adds the Service's ClusterIP to the credentials
  Secret's uri as ``hostaddr`` (the local stack, whose host has no cluster DNS).
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field

from dbi import environment
from dbi.backups import StoreLocation
from dbi.databases import DEFAULT_EXTENSIONS
from dbi.fields import duration_seconds
from dbi.quantity import parse_quantity
from dbi.roles import DEFAULT_GRANTABLE
from dbi.spec import SUPPORTED_VERSIONS

ADMIN_USER = "dbi_admin"
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _default_images() -> dict[int, str]:
    return {v: f"dbi-images/postgres-{v}" for v in SUPPORTED_VERSIONS}


DEFAULT_ADMIN_ROTATION_SECONDS = 30 * 86400.0
DEFAULT_TLS_CERT_SECONDS = 90 * 86400.0
DEFAULT_SCRATCH_BYTES = 16 * 2**30
# A certificate shorter-lived than this would be renewed before a pass could use it.
MIN_TLS_CERT_SECONDS = 30.0


@dataclass(frozen=True)
class Config:
    images: dict[int, str] = field(default_factory=_default_images)
    exporter_port: int = 9187
    namespace: str = "dbi-system"
    # None: the admin password is rotated on demand only.
    admin_rotation_seconds: float | None = DEFAULT_ADMIN_ROTATION_SECONDS
    # The credentials Secret's uri also names the Service's ClusterIP (dev stacks).
    connect_hostaddr: bool = False
    tls_cert_seconds: float = DEFAULT_TLS_CERT_SECONDS
    # Where backups go (dbi.backups.StoreLocation); None: backups cannot be taken.
    backup_store: StoreLocation | None = None
    s3_endpoint: str | None = None
    # The directory of pg_basebackup; None: PATH.
    pg_bin_dir: str | None = None
    # pg_basebackup's --max-rate (such as 64M); None: no cap.
    backup_max_rate: str | None = None
    # Networks a tenant's backup endpoint may reach besides public addresses.
    allowed_networks: tuple[Network, ...] = ()
    # How much one backup may stage in the worker's scratch directory, bytes.
    backup_scratch_bytes: int = DEFAULT_SCRATCH_BYTES
    # Namespaces spec.image may name besides those of ``images`` (DBI_IMAGE_NAMESPACES).
    more_image_namespaces: frozenset[str] = frozenset()
    # The extensions a DBDatabase may create (DBI_EXTENSIONS).
    extensions: frozenset[str] = DEFAULT_EXTENSIONS
    # The predefined roles a DBRole may be a member of (DBI_GRANTABLE_ROLES).
    grantable: frozenset[str] = DEFAULT_GRANTABLE

    @property
    def image_namespaces(self) -> frozenset[str]:
        """The namespaces whose VirtualMachineImages an instance may boot: those the
        configured images are in, and DBI_IMAGE_NAMESPACES."""
        configured = {image.split("/", 1)[0] for image in self.images.values()}
        return frozenset(configured) | self.more_image_namespaces

    @classmethod
    def from_env(cls) -> Config:
        """Read the configuration; a malformed variable is an error naming it."""
        images = _default_images()
        if raw := environment.IMAGES.get():
            try:
                images = {int(k): str(v) for k, v in json.loads(raw).items()}
            except (ValueError, AttributeError) as e:
                raise ValueError(
                    f"DBI_IMAGES must be a JSON object of version to image: {e}"
                ) from None
        port = environment.EXPORTER_PORT.integer(low=1, high=65535)
        rotation = environment.ADMIN_ROTATION_INTERVAL.value()
        try:
            seconds = 0.0 if rotation == "0" else duration_seconds(rotation)
        except ValueError:
            raise ValueError(
                f"DBI_ADMIN_ROTATION_INTERVAL must be a duration such as 720h, or 0: {rotation!r}"
            ) from None
        lifetime = environment.TLS_CERT_LIFETIME.value()
        try:
            cert_seconds = duration_seconds(lifetime)
        except ValueError:
            cert_seconds = 0.0
        if cert_seconds < MIN_TLS_CERT_SECONDS:
            raise ValueError(
                f"DBI_TLS_CERT_LIFETIME must be a duration of at least 30s, such as 2160h: "
                f"{lifetime!r}"
            )
        return cls(
            images=images,
            exporter_port=port or cls.exporter_port,
            namespace=environment.NAMESPACE.value(),
            admin_rotation_seconds=seconds or None,
            connect_hostaddr=environment.CONNECT_HOSTADDR.get() == "1",
            tls_cert_seconds=cert_seconds,
            backup_store=_store(),
            s3_endpoint=environment.BACKUP_S3_ENDPOINT.get(),
            pg_bin_dir=environment.PG_BIN_DIR.get(),
            backup_max_rate=_max_rate(),
            allowed_networks=_networks(),
            backup_scratch_bytes=_scratch_bytes(),
            more_image_namespaces=frozenset(environment.IMAGE_NAMESPACES.items() or ()),
            extensions=frozenset(environment.EXTENSIONS.items() or DEFAULT_EXTENSIONS),
            grantable=frozenset(environment.GRANTABLE_ROLES.items() or DEFAULT_GRANTABLE),
        )


def _scratch_bytes() -> int:
    raw = environment.BACKUP_SCRATCH_LIMIT.value()
    try:
        found = int(parse_quantity(raw))
    except ValueError:
        found = 0
    if found < 2**20:
        raise ValueError(
            f"DBI_BACKUP_SCRATCH_LIMIT must be a quantity of at least 1Mi, such as 16Gi: {raw!r}"
        )
    return found


def _networks() -> tuple[Network, ...]:
    raw = environment.BACKUP_ALLOWED_NETWORKS.get() or ""
    try:
        return tuple(ipaddress.ip_network(n.strip()) for n in raw.split(",") if n.strip())
    except ValueError as e:
        raise ValueError(
            f"DBI_BACKUP_ALLOWED_NETWORKS must be comma-separated CIDRs such as 10.43.0.0/16: {e}"
        ) from None


def _max_rate() -> str | None:
    raw = environment.BACKUP_MAX_RATE.get()
    if raw is None:
        return None
    found = re.fullmatch(r"([0-9]+)([kM]?)", raw)
    kilobytes = int(found[1]) * (1024 if found[2] == "M" else 1) if found else 0
    if not 32 <= kilobytes <= 1024 * 1024:
        raise ValueError(f"DBI_BACKUP_MAX_RATE must be from 32k to 1024M, such as 64M: {raw!r}")
    return raw


def _store() -> StoreLocation | None:
    raw = environment.BACKUP_STORE.get()
    if raw is None:
        return None
    try:
        return StoreLocation.parse(raw)
    except ValueError as e:
        raise ValueError(f"DBI_BACKUP_STORE {e}: {raw!r}") from None
