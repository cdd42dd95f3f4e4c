"""The orchestrator's own credential for each instance: the PostgreSQL admin password.

It lives in a Secret of the orchestrator's namespace (``DBI_NAMESPACE``, default
``dbi-system``), named after the instance's UID (``dbi-admin-<uid>``), where tenants
cannot read or delete it; the guest gets only its SCRAM verifier, through the boot
data. Keys and annotations:

- ``username``, ``password``: the password that works (the source of truth);
- ``next``: a new password being rotated in: written *before* ``ALTER ROLE``, so dbi
  never holds two passwords it does not know (whichever of the two logs in wins, and
  ``next`` is dropped or promoted);
- ``dbi.dev/admin-rotated-at``: when ``password`` was set (scheduled rotation);
- ``dbi.dev/admin-reset``: a token: the guest is to set ``password`` at its next boot
  (break-glass recovery of a lost or refused credential), with
  ``dbi.dev/admin-reset-vmi``: the VMI dbi restarted for it;
- ``dbi.dev/rotation-id``: the on-demand rotation last carried out (a retry of it does
  not rotate again).

Writes are server-side applies naming the UID that was read (a Secret deleted since
gives 409, never a silent re-creation with stale content).
"""

from __future__ import annotations

import base64
import secrets as token
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kubernetes import client as k8s

from activities.infra.kube import Instance, Kube, Manifest, or_none
from dbi import names
from dbi.config import ADMIN_USER

NEXT = "next"
ROTATED_AT = "dbi.dev/admin-rotated-at"
RESET = "dbi.dev/admin-reset"
RESET_VMI = "dbi.dev/admin-reset-vmi"
REQUEST = "dbi.dev/rotation-id"  # the on-demand rotation last carried out
INSTANCE_NAMESPACE_LABEL = "dbi.dev/instance-namespace"


def name_for(uid: str) -> str:
    """Return the name of the admin credential of the instance with ``uid``."""
    return f"dbi-admin-{uid}"


@dataclass(frozen=True)
class Credential:
    """The admin credential as read (``uid`` None: there is none). Its repr shows no
    password."""

    uid: str | None
    data: dict[str, str]
    annotations: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    resource_version: str | None = None  # as read: what an action may write over

    def __repr__(self) -> str:
        return f"Credential(uid={self.uid!r}, keys={sorted(self.data)!r})"

    def of(self, namespace: str, name: str) -> bool:
        """Whether the credential was written for an instance of that namespace and name
        (its labels, in dbi's namespace, where only dbi writes)."""
        labels = self.labels
        return (labels.get(INSTANCE_NAMESPACE_LABEL), labels.get(names.INSTANCE_LABEL)) == (
            namespace,
            name,
        )

    @property
    def password(self) -> str:
        return self.data.get("password", "")

    @property
    def next(self) -> str:
        """The password being rotated in; empty when none is (or it is already the one)."""
        candidate = self.data.get(NEXT, "")
        return "" if candidate == self.password else candidate

    @property
    def reset(self) -> str | None:
        return self.annotations.get(RESET) or None

    @property
    def reset_vmi(self) -> str | None:
        return self.annotations.get(RESET_VMI) or None

    def rotated_at(self) -> datetime | None:
        try:
            return datetime.fromisoformat(self.annotations[ROTATED_AT])
        except (KeyError, ValueError):
            return None


def read(kube: Kube, namespace: str, uid: str) -> Credential:
    """Read the admin credential of the instance with ``uid`` from ``namespace`` (the
    orchestrator's)."""
    found = kube.secret(namespace, name_for(uid))
    if found is None:
        return Credential(uid=None, data={}, annotations={})
    meta = found.metadata or k8s.V1ObjectMeta()
    data = {k: base64.b64decode(v).decode() for k, v in (found.data or {}).items()}
    return Credential(
        uid=meta.uid,
        data=data,
        annotations=dict(meta.annotations or {}),
        labels=dict(meta.labels or {}),
        resource_version=meta.resource_version,
    )


def write(
    kube: Kube,
    namespace: str,
    instance: Instance,
    data: dict[str, str],
    *,
    annotations: Mapping[str, str | None],
    read_uid: str | None,
) -> None:
    """Apply the instance's admin credential with exactly ``data`` and these annotations
    (None drops one), naming ``read_uid`` when it was read."""
    metadata: Manifest = {
        "name": name_for(instance.uid),
        "namespace": namespace,
        "labels": {
            names.INSTANCE_LABEL: instance.name,
            INSTANCE_NAMESPACE_LABEL: instance.namespace,
        },
        "annotations": {
            names.INSTANCE_UID_ANNOTATION: instance.uid,
            **{k: v for k, v in annotations.items() if v is not None},
        },
    }
    if read_uid is not None:
        metadata["uid"] = read_uid
    # ``data``, not ``stringData``: a key this apply leaves out (``next``, once promoted)
    # must go, and server-side apply owns ``data``'s keys, not those of stringData.
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    kube.apply_secret(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": metadata,
            "type": "Opaque",
            "data": {"username": base64.b64encode(ADMIN_USER.encode()).decode(), **encoded},
        }
    )


def create(
    kube: Kube, namespace: str, instance: Instance, password: str, *, reset: bool = False
) -> Credential:
    """Write the instance's admin credential anew with ``password``, rotated now; with a
    reset token (``reset``) when the guest is to take it at its next boot."""
    annotations = {ROTATED_AT: now(), RESET: token.token_hex(8) if reset else None}
    write(kube, namespace, instance, {"password": password}, annotations=annotations, read_uid=None)
    present = {k: v for k, v in annotations.items() if v is not None}
    return Credential(uid=None, data={"password": password}, annotations=present)


def take_over(
    kube: Kube, namespace: str, instance: Instance, old_uid: str, taken: Credential
) -> None:
    """Make ``taken``, the deleted instance ``old_uid``'s credential (the one its
    retained data knows; the caller checked it may), the instance's, then delete the old
    one, naming the UID read: only the credential that was checked goes."""
    assert taken.uid is not None
    data = {"password": taken.password}
    write(kube, namespace, instance, data, annotations=kept_annotations(taken), read_uid=None)
    only_that = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=taken.uid))
    old = name_for(old_uid)
    or_none(lambda: kube.core.delete_namespaced_secret(old, namespace, body=only_that))


def kept_annotations(credential: Credential) -> dict[str, str | None]:
    """The annotations a write carries over unchanged."""
    return {k: credential.annotations.get(k) for k in (ROTATED_AT, RESET, RESET_VMI, REQUEST)}


def now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()
