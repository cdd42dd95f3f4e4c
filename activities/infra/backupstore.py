"""The backup store: where backups' files go, behind one small interface.

Two implementations: an S3-compatible bucket (the MinIO client, which speaks to AWS S3,
MinIO, Ceph RGW, Longhorn's and most clusters' object stores) and a directory (a PVC
mounted in the worker; the local stack's default). A backup's files are written first
and its manifest (``MANIFEST``) last: a backup without a manifest is incomplete, and
nothing reads it as a backup. Keys are relative to the store's location.

A tenant's bucket (``spec.backup.target``) is reached only at addresses
``activities.infra.endpoints`` allows, and what its server answers never leaves the worker's
log: a failed request raises ``StoreFailed``, whose message is dbi's own words and the
HTTP status at most (a tenant reads it in a DBBackup's status).
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import urllib3
from minio import Minio
from minio.credentials.providers import StaticProvider
from minio.error import InvalidResponseError, MinioException, S3Error, ServerError

from activities.infra import endpoints
from activities.infra.kube import Instance, Kube
from activities.infra.s3credentials import operator_credentials
from dbi import environment
from dbi.backup_spec import BackupTarget
from dbi.backups import StoreKind, StoreLocation, StoreRef
from dbi.config import Config, Network

log = logging.getLogger("dbi.backupstore")
# The keys of a tenant's store Secret (spec.backup.target.s3.credentialsSecret).
KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")
# The file a backup's manifest is written to, last.
MANIFEST = "dbi-backup.json"
# How long a restored instance's first boot may take to fetch its backup (S3's limit
# for a presigned URL is 7 days).
URL_LIFETIME = timedelta(days=7)
# Objects above this size are uploaded in parts of this size (S3 allows 10,000 parts).
PART_BYTES = 64 * 2**20


class StoreFailed(Exception):
    """A request to the store failed. The message is safe to show a tenant: dbi's words
    and the HTTP status, never the store's answer (that goes to the log)."""

    def __init__(self, message: str, *, refused: bool = False) -> None:
        super().__init__(message)
        self.refused = refused  # the endpoint's address may not be reached: no retry helps


def _failed(error: Exception) -> StoreFailed:
    """What a failed S3 request says to a tenant (and the whole of it to the log)."""
    log.warning("backup store request failed: %r", error)
    if isinstance(error, endpoints.EndpointRefused):
        return StoreFailed(str(error), refused=True)
    status = _status(error)
    said = f" (HTTP {status})" if status is not None else ""
    return StoreFailed(f"the backup store did not complete the request{said}")


def _status(error: Exception) -> int | None:
    """The HTTP status a failed S3 request got, if it got one."""
    if isinstance(error, S3Error) and error.response is not None:
        return int(error.response.status)
    if isinstance(error, ServerError):
        return error.status_code
    if isinstance(error, InvalidResponseError):
        return int(error._code)  # its only record of the status
    return None


class Store(Protocol):
    """Where backups' files are kept."""

    location: StoreLocation

    def upload(self, key: str, path: Path) -> None:
        """Put the file at ``path`` under ``key``, replacing what was there."""

    def download(self, key: str, path: Path) -> None:
        """Write the object ``key`` to ``path``; FileNotFoundError when it is absent."""

    def read(self, key: str) -> bytes | None:
        """The bytes of a small object, or None when it is absent."""

    def write(self, key: str, data: bytes) -> None:
        """Put a small object, whole or not at all."""

    def keys(self, prefix: str) -> list[str]:
        """The keys under ``prefix``, sorted."""

    def delete(self, prefix: str) -> int:
        """Delete every object under ``prefix``; return how many there were."""

    def url(self, key: str) -> str:
        """Where a guest fetches ``key`` from: a presigned URL (S3), or a file URL."""


def for_instance(kube: Kube, config: Config, instance: Instance) -> Store:
    """The store the instance's backups go to: spec.backup.target, else the
    orchestrator's; ValueError saying why there is none."""
    return for_ref(kube, config, instance.namespace, ref_of(target_of(instance)))


def target_of(instance: Instance) -> BackupTarget | None:
    """spec.backup.target, or None (the orchestrator's store)."""
    backup = instance.model.spec.backup
    return backup.target if backup is not None else None


def ref_of(target: BackupTarget | None) -> StoreRef | None:
    """The reference a DBBackup keeps of ``target`` (None: the orchestrator's store)."""
    if target is None:
        return None
    s3 = target.s3
    return StoreRef(
        url=StoreLocation.parse(f"s3://{s3.bucket}/{s3.prefix}").url(),
        endpoint=s3.endpoint,
        credentials_secret=s3.credentials_secret,
    )


def for_ref(kube: Kube, config: Config, namespace: str, ref: StoreRef | None) -> Store:
    """The store ``ref`` names, with its keys from its Secret in ``namespace``; the
    orchestrator's when None. ValueError saying why it cannot be opened."""
    if ref is None:
        return open_store(config)
    if ref.endpoint is not None and (
        refused := endpoints.refusal(ref.endpoint, config.allowed_networks)
    ):
        raise ValueError(refused)
    field = "spec.backup.target.s3.credentialsSecret"
    secret = kube.secret(namespace, ref.credentials_secret)
    data = (secret.data or {}) if secret is not None else {}
    keys = tuple(base64.b64decode(data.get(k, "")).decode() for k in KEYS)
    if secret is None or not all(keys):
        raise ValueError(
            f"{field}: Secret {namespace}/{ref.credentials_secret} must hold {' and '.join(KEYS)}"
        )
    return S3Store(
        StoreLocation.parse(ref.url),
        endpoint=ref.endpoint,
        keys=(keys[0], keys[1]),
        networks=config.allowed_networks,
    )


def open_store(config: Config) -> Store:
    """The store the configuration names; ValueError when it names none."""
    location = config.backup_store
    if location is None:
        raise ValueError("DBI_BACKUP_STORE is not set")
    if location.kind is StoreKind.FILE:
        return DirectoryStore(location)
    return S3Store(location, endpoint=config.s3_endpoint)


# The temporary names a DirectoryStore writes under before the rename: never keys.
IN_FLIGHT = (".upload-", ".write-")


class DirectoryStore:
    """A directory; each write lands under a temporary name (``IN_FLIGHT``) and is
    renamed into place; ``keys`` lists only what was renamed."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self.root = Path(location.prefix)

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"key {key!r} leaves the store")
        return path

    def upload(self, key: str, path: Path) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=IN_FLIGHT[0])
        os.close(fd)
        shutil.copyfile(path, tmp)
        os.replace(tmp, target)

    def download(self, key: str, path: Path) -> None:
        shutil.copyfile(self._path(key), path)

    def read(self, key: str) -> bytes | None:
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, key: str, data: bytes) -> None:
        target = self._path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=IN_FLIGHT[1])
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, target)

    def keys(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        root = self.root.resolve()
        found = base.rglob("*")
        done = (p for p in found if p.is_file() and not p.name.startswith(IN_FLIGHT))
        return sorted(str(p.relative_to(root)) for p in done)

    def delete(self, prefix: str) -> int:
        path = self._path(prefix)
        if path.is_file():  # one object's key, as S3's delete takes it
            path.unlink()
            return 1
        found = self.keys(prefix)
        shutil.rmtree(path, ignore_errors=True)
        return len(found)

    def url(self, key: str) -> str:
        """A file URL: only a guest on this host reads it (the local stack's stand-in)."""
        return self._path(key).as_uri()


class S3Store:
    """An S3-compatible bucket, with the operator's credentials (``s3credentials``)
    or a tenant's keys (never in the location or a log line). Each request that fails
    raises ``StoreFailed`` (a missing key reads as absent)."""

    def __init__(
        self,
        location: StoreLocation,
        *,
        endpoint: str | None,
        keys: tuple[str, str] | None = None,
        networks: tuple[Network, ...] | None = None,
    ) -> None:
        """``keys``: the access key and secret key; None: the worker's AWS_* variables.
        ``networks``: a tenant's bucket, reached only at public addresses or in these
        networks (``activities.infra.endpoints``); None: the operator's own store."""
        self.location = location
        credentials = operator_credentials() if keys is None else StaticProvider(*keys)
        url = urlsplit(endpoint or "https://s3.amazonaws.com")
        if url.scheme not in {"http", "https"} or not url.netloc:
            raise ValueError(f"DBI_BACKUP_S3_ENDPOINT must be an http(s) URL: {endpoint!r}")
        options: dict[str, Any] = {
            "timeout": urllib3.Timeout(connect=5, read=60),
            "retries": urllib3.Retry(total=3, backoff_factor=0.5),
        }
        self.client = Minio(
            url.netloc,
            credentials=credentials,
            secure=url.scheme == "https",
            region=environment.AWS_REGION.value(),
            http_client=urllib3.PoolManager(**options)
            if networks is None
            else endpoints.pool(networks, **options),
        )

    def _key(self, key: str) -> str:
        return self.location.prefix + key

    def upload(self, key: str, path: Path) -> None:
        with _requests():
            self.client.fput_object(
                self.location.bucket, self._key(key), str(path), part_size=PART_BYTES
            )

    def _absent(self, key: str) -> bool:
        """Whether ``key`` is absent: a HEAD first, whose 404 every S3 server reports the
        same way (a GET's error body differs between servers)."""
        with _requests():
            try:
                self.client.stat_object(self.location.bucket, self._key(key))
            except S3Error as e:
                if e.code in {"NoSuchKey", "ResourceNotFound"}:
                    return True
                raise
        return False

    def download(self, key: str, path: Path) -> None:
        if self._absent(key):
            raise FileNotFoundError(key)
        with _requests():
            self.client.fget_object(self.location.bucket, self._key(key), str(path))

    def read(self, key: str) -> bytes | None:
        if self._absent(key):
            return None
        with _requests():
            response = self.client.get_object(self.location.bucket, self._key(key))
            try:
                return response.read()
            finally:
                response.close()
                response.release_conn()

    def write(self, key: str, data: bytes) -> None:
        with _requests():
            self.client.put_object(
                self.location.bucket, self._key(key), io.BytesIO(data), len(data)
            )

    def keys(self, prefix: str) -> list[str]:
        with _requests():
            found = self.client.list_objects(
                self.location.bucket, prefix=self._key(prefix), recursive=True
            )
            start = len(self.location.prefix)
            return sorted((o.object_name or "")[start:] for o in found if o.object_name)

    def delete(self, prefix: str) -> int:
        found = self.keys(prefix)
        with _requests():
            for key in found:
                self.client.remove_object(self.location.bucket, self._key(key))
        return len(found)

    def url(self, key: str) -> str:
        """A presigned GET URL, valid for URL_LIFETIME: the guest needs no key of its own."""
        with _requests():
            return self.client.presigned_get_object(
                self.location.bucket, self._key(key), expires=URL_LIFETIME
            )


@contextlib.contextmanager
def _requests() -> Iterator[None]:
    """Turn what a failed request raised into ``StoreFailed`` (its detail to the log)."""
    try:
        yield
    except (MinioException, urllib3.exceptions.HTTPError, OSError, ValueError) as e:
        raise _failed(e) from None
