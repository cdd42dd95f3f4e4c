"""The kinds dbi lists and watches, in one table: which the watcher watches to wake an
instance's workflow (``watcher.watcher.sources``) and which the worker's views keep
for its idle passes and re-checks (``activities.infra.views``), and how to list either.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s

from dbi import names
from dbi.streams import Source, metadata_only


@dataclass(frozen=True)
class Kind:
    """A kind: its collection's path (``api/v1/services``), whether its objects live in
    namespaces, and whether only those with the instance label are wanted (an
    instance's children) or all of them; whether the watcher watches it (``watched``),
    as metadata alone (``metadata``: never a Secret's data), and whether the worker's
    views keep it (``viewed``, always as metadata)."""

    name: str
    path: str
    namespaced: bool = True
    labelled: bool = True
    watched: bool = False
    metadata: bool = False
    viewed: bool = False

    @property
    def selector(self) -> str | None:
        return names.INSTANCE_LABEL if self.labelled else None


DBINSTANCES = Kind(
    "DBInstance",
    f"apis/{names.GROUP}/{names.VERSION}/{names.PLURAL}",
    labelled=False,
    watched=True,
    viewed=True,
)
# An instance's backups: watched for the watcher's backup metrics, never to wake.
DBBACKUPS = Kind(
    "DBBackup", f"apis/{names.GROUP}/{names.VERSION}/{names.BACKUP_PLURAL}", watched=True
)
# DBDatabases and DBRoles: each wakes its own workflow (watcher.objects).
DBDATABASES = Kind(
    names.DATABASE_KIND,
    f"apis/{names.GROUP}/{names.VERSION}/{names.DATABASE_PLURAL}",
    labelled=False,
    watched=True,
)
DBROLES = Kind(
    names.ROLE_KIND,
    f"apis/{names.GROUP}/{names.VERSION}/{names.ROLE_PLURAL}",
    labelled=False,
    watched=True,
)
DECLARED = (DBDATABASES.name, DBROLES.name)
KINDS = (
    DBINSTANCES,
    DBBACKUPS,
    DBDATABASES,
    DBROLES,
    Kind("Secret", "api/v1/secrets", watched=True, metadata=True),
    Kind("PersistentVolumeClaim", "api/v1/persistentvolumeclaims", watched=True, viewed=True),
    Kind("Service", "api/v1/services", watched=True, viewed=True),
    Kind("VirtualMachine", "apis/kubevirt.io/v1/virtualmachines", watched=True, viewed=True),
    Kind(
        "VirtualMachineInstance",
        "apis/kubevirt.io/v1/virtualmachineinstances",
        watched=True,
        viewed=True,
    ),
    Kind("ServiceMonitor", "apis/monitoring.coreos.com/v1/servicemonitors", viewed=True),
    Kind(
        "PersistentVolume",
        "api/v1/persistentvolumes",
        namespaced=False,
        labelled=False,
        viewed=True,
    ),
)
WATCHED = tuple(k for k in KINDS if k.watched)
VIEWED = tuple(k for k in KINDS if k.viewed)
# The core kinds' names in the generated client's list functions.
_CORE = {
    "secrets": "secret",
    "persistentvolumeclaims": "persistent_volume_claim",
    "services": "service",
    "persistentvolumes": "persistent_volume",
}


def source(
    api: k8s.ApiClient, kind: Kind, namespace: str | None = None, *, metadata: bool = False
) -> Source:
    """How to list and watch ``kind``'s objects: in ``namespace`` (None: every namespace,
    or a cluster-scoped kind), as metadata alone when ``metadata``."""
    parts = kind.path.split("/")
    if parts[0] == "api":
        core = k8s.CoreV1Api(api)
        plural = _CORE[parts[2]]
        if not kind.namespaced:
            list_fn: Callable[..., Any] = getattr(core, f"list_{plural}")
            args: tuple[Any, ...] = ()
        elif namespace is None:
            list_fn, args = getattr(core, f"list_{plural}_for_all_namespaces"), ()
        else:
            list_fn, args = getattr(core, f"list_namespaced_{plural}"), (namespace,)
    else:
        objects = k8s.CustomObjectsApi(api)
        group, version, plural = parts[1:]
        if namespace is None:
            list_fn, args = objects.list_cluster_custom_object, (group, version, plural)
        else:
            list_fn = objects.list_namespaced_custom_object
            args = (group, version, namespace, plural)
    if metadata:
        list_fn = metadata_only(list_fn)
    return Source(kind.name, list_fn, args, kind.selector, namespace)
