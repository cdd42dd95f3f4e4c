"""The instance's Secrets: admin, app credentials (users get it) and cloud-init user-data.

The Secret is the password's source of truth: a password is generated (``secrets``)
only when there is no Secret or no password in it. Writes are server-side applies;
when the Secret was read, the apply names its UID, so if it was deleted since, the
API server answers 409 Conflict instead of recreating it with the old password.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from kubernetes import client as k8s
from temporalio import activity

from activities.infra.kube import Instance, Kube, Manifest
from activities.infra.reads import spares_reads
from dbi import bootstrap

ROTATION_ANNOTATION = "dbi.dev/rotation-id"


def app_name(instance: Instance) -> str:
    """The credentials Secret apps read: spec.credentials.secretName, else
    <name>-credentials."""
    return instance.model.spec.credentials.secret_name or f"{instance.name}-credentials"


def cloudinit_name(instance: Instance) -> str:
    return f"{instance.name}-cloudinit"


def kept(instance: Instance, name: str) -> bool:
    """Whether deletionPolicy Retain keeps the Secret: the VM boots from cloud-init, so
    that one stays with it (dbi keeps the admin credential in its own namespace)."""
    return name == cloudinit_name(instance)


def new_password() -> str:
    """Return a strong password (192 random bits, URL-safe)."""
    return secrets.token_urlsafe(24)


@dataclass(frozen=True)
class Read:
    """A Secret as read: its UID (None when missing), data and annotations. Its repr
    shows the UID and the data's keys, nothing else."""

    uid: str | None
    data: dict[str, str]
    annotations: dict[str, str]
    resource_version: str | None = None
    meta: Manifest | None = None  # None: there is no such Secret

    @property
    def password(self) -> str:
        return self.data.get("password", "")

    def __repr__(self) -> str:
        # Not the data, nor the annotations and metadata, where a client-side
        # `kubectl apply` leaves the whole Secret (last-applied-configuration).
        return f"Read(uid={self.uid!r}, keys={sorted(self.data)!r})"

    def uid_only(self) -> Read:
        """This read without its resourceVersion (``apply``)."""
        return replace(self, resource_version=None)


# A Secret there is none of (or a read left out: ``activities.infra.reads.spares_reads``).
NONE = Read(uid=None, data={}, annotations={})


def _text(value: str | bytes) -> str:
    """A Secret value as text; one a user left unusable (not UTF-8, or with a NUL, which
    no password may hold) reads as empty: the step repairs it as it does a missing one,
    instead of failing on every pass."""
    try:
        text = base64.b64decode(value).decode()
    except (ValueError, UnicodeDecodeError):
        return ""
    return "" if "\x00" in text else text


def read(kube: Kube, namespace: str, name: str) -> Read:
    found = kube.secret(namespace, name)
    if found is None:
        return NONE
    meta = found.metadata or k8s.V1ObjectMeta()
    data = {k: _text(v) for k, v in (found.data or {}).items()}
    return Read(
        uid=meta.uid,
        data=data,
        annotations=dict(meta.annotations or {}),
        resource_version=meta.resource_version,
        meta=dict(kube.api.sanitize_for_serialization(meta) or {}),
    )


def read_boot(kube: Kube, instance: Instance) -> Read:
    """The instance's cloud-init Secret. An idle pass takes this worker's read of it from
    the last hour when there is one (``activities.infra.reads.Spared``: a change to it wakes
    the instance), and a step that would act on it then runs the pass again with it read
    (``activities.infra.reads.spares_reads``); any other read goes to the server and is kept."""
    key = _spared_key(instance, cloudinit_name(instance))
    spared = kube.views.spared if kube.views is not None else None
    kept = spared.get(key) if spared is not None else None
    if kept is not None and spares_reads():
        return cast(Read, kept)
    found = read(kube, instance.namespace, cloudinit_name(instance))
    if spared is not None:
        spared.put(key, found)
    return found


def _spared_key(instance: Instance, name: str) -> tuple[str, str, str]:
    return (instance.namespace, name, instance.uid)


def apply(
    kube: Kube,
    instance: Instance,
    name: str,
    data: dict[str, str],
    *,
    read: Read,
    annotations: dict[str, str] | None = None,
) -> k8s.V1Secret:
    """Apply a Secret of the instance with exactly ``data``, made from ``read`` (``NONE``:
    from nothing read).

    The apply names the read's UID and resourceVersion: the API server answers 409 when the
    Secret was deleted after the read, or written (a user setting their own password, say),
    instead of this apply putting what was read back over it. ``read.uid_only()`` keeps the
    UID alone, for an apply that is to win over any write but a deletion."""
    metadata: Manifest = instance.child_metadata(
        name, kept=kept(instance, name), annotations=annotations or {}
    )
    if read.uid is not None:
        metadata["uid"] = read.uid
    if read.resource_version is not None:
        metadata["resourceVersion"] = read.resource_version
    manifest: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "type": "Opaque",
        "stringData": data,
    }
    if kube.views is not None:
        kube.views.spared.forget(_spared_key(instance, name))
    return kube.apply_secret(manifest)


def boot_data(cloudinit: Read) -> bootstrap.Bootstrap | None:
    """The bootstrap document a cloud-init Secret delivers; None when it holds none."""
    try:
        return bootstrap.from_userdata(cloudinit.data.get(bootstrap.USERDATA_KEY, ""))
    except ValueError:
        return None


def ours(current: Read) -> dict[str, str]:
    """Return the annotations we set on a Secret, to carry them into the next apply."""
    return {k: v for k, v in current.annotations.items() if k == ROTATION_ANNOTATION}


def conflict(error: k8s.ApiException) -> bool:
    return bool(error.status == 409)


def apply_password(
    kube: Kube,
    instance: Instance,
    name: str,
    current: Read,
    data_for: Callable[[str], dict[str, str]],
    *,
    keep: str = "",
) -> str | None:
    """Apply a Secret with the password it has (``keep``) or a new one; return the password,
    or None when the Secret was written after it was read (a user setting their own
    password): nothing is written, and the next look reads it again.

    A 409 on the UID precondition means the Secret was deleted after it was read: a new
    password is made and applied without the precondition.
    """
    password = keep or new_password()
    try:
        apply(
            kube,
            instance,
            name,
            data_for(password),
            read=current,
            annotations=ours(current),
        )
    except k8s.ApiException as e:
        if not conflict(e):
            raise
        if read(kube, instance.namespace, name).uid is not None:
            activity.logger.info("Secret %s was written after it was read; read again", name)
            return None
        activity.logger.info("Secret %s was deleted after it was read; new password", name)
        password = new_password()
        apply(kube, instance, name, data_for(password), read=NONE)
    return password
