"""The stand-in's storage: a CSI provisioner and the PersistentVolume controller's part.

Dev and test infrastructure, never used in production. For each claim of the stack's
StorageClass it provisions a PersistentVolume (``pvc-<claim uid>``, a directory under
the stand-in's disks), binds the two both ways, and grows the volume when the claim's
request grows. A claim made for an existing volume (``spec.volumeName``, as when a
retained volume is reused) is bound to it if the volume is free. When a claim goes,
its volume is reclaimed as its ``persistentVolumeReclaimPolicy`` says, as Kubernetes
does: ``Delete`` deletes the volume and its directory (the disk and its data), and
``Retain`` keeps both, ``Released``, until someone frees the volume (clears its
``claimRef``: ``Available`` again) or deletes it. Like many cloud CSI drivers, it
allocates whole GiB: a claim for 1500Mi gets a 2Gi volume.
"""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from dbi.quantity import parse_quantity

log = logging.getLogger("devstack.vmstandin")

# The StorageClass's provisioner name, and the CSI driver its volumes name (a DNS name).
PROVISIONER = "devstack.dbi.dev/vm-standin"
DRIVER = "vm-standin.devstack.dbi.dev"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


def allocated(requested: str) -> str:
    """The capacity a request gets: rounded up to whole GiB."""
    return f"{math.ceil(parse_quantity(requested) / 2**30)}Gi"


def or_none(read: Any) -> Any:
    try:
        return read()
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise


class Storage:
    def __init__(self, core: k8s.CoreV1Api, storage: k8s.StorageV1Api, disks: Path) -> None:
        self.core = core
        self.storage = storage
        self.disks = disks

    def disk_of(self, namespace: str, claim: str) -> Path | None:
        """Return the directory of the volume a claim is bound to (its ``volumeName``,
        whose ``claimRef`` names the claim back); None until it is. A claim that merely
        names another claim's volume gets nothing, as a kubelet would mount nothing."""
        pvc = or_none(lambda: self.core.read_namespaced_persistent_volume_claim(claim, namespace))
        name = pvc.spec.volume_name if pvc is not None and pvc.spec else None
        volume = or_none(lambda: self.core.read_persistent_volume(name)) if name else None
        ref = volume.spec.claim_ref if volume is not None else None
        if ref is None or ref.uid != pvc.metadata.uid:
            return None
        return self.disks / str(name)

    # A claim ---------------------------------------------------------------------

    def bind(self, pvc: Any) -> None:
        """Provision a volume for the claim (or take the one it names), bind both, and
        give the claim the capacity it requests (expanding, never shrinking)."""
        if pvc.metadata.deletion_timestamp is not None:
            return
        requested = allocated(str((pvc.spec.resources.requests or {}).get("storage") or "1Gi"))
        status = pvc.status
        capacity = (status.capacity or {}).get("storage") if status else None
        settled = status is not None and status.phase == "Bound" and capacity == requested
        if settled and pvc.spec.volume_name:
            return
        name = pvc.spec.volume_name or self._provision(pvc, requested)
        volume = or_none(lambda: self.core.read_persistent_volume(name))
        if volume is None:
            return  # a claim for a volume that does not exist stays Pending, as in Kubernetes
        ref = volume.spec.claim_ref
        if ref is not None and ref.uid and ref.uid != pvc.metadata.uid:
            return  # the volume is another claim's (or Released): this one stays Pending
        have = str((volume.spec.capacity or {}).get("storage") or requested)
        if parse_quantity(requested) > parse_quantity(have):
            have = requested  # expand the volume, as a CSI resizer would
        self.core.patch_persistent_volume(
            name,
            {
                "spec": {
                    "capacity": {"storage": have},
                    "claimRef": {
                        "apiVersion": "v1",
                        "kind": "PersistentVolumeClaim",
                        "namespace": pvc.metadata.namespace,
                        "name": pvc.metadata.name,
                        "uid": pvc.metadata.uid,
                    },
                }
            },
        )
        self.core.patch_persistent_volume_status(name, {"status": {"phase": "Bound"}})
        if not pvc.spec.volume_name:
            self.core.patch_namespaced_persistent_volume_claim(
                pvc.metadata.name, pvc.metadata.namespace, {"spec": {"volumeName": name}}
            )
        self.core.patch_namespaced_persistent_volume_claim_status(
            pvc.metadata.name,
            pvc.metadata.namespace,
            {
                "status": {
                    "phase": "Bound",
                    "accessModes": pvc.spec.access_modes or ["ReadWriteOnce"],
                    "capacity": {"storage": have},
                }
            },
        )

    def _provision(self, pvc: Any, requested: str) -> str:
        """Create the claim's volume, with its class's reclaim policy; return its name."""
        name = f"pvc-{pvc.metadata.uid}"
        body = k8s.V1PersistentVolume(
            metadata=k8s.V1ObjectMeta(
                name=name, annotations={"pv.kubernetes.io/provisioned-by": PROVISIONER}
            ),
            spec=k8s.V1PersistentVolumeSpec(
                capacity={"storage": requested},
                access_modes=pvc.spec.access_modes or ["ReadWriteOnce"],
                persistent_volume_reclaim_policy=self._reclaim_policy(pvc),
                storage_class_name=pvc.spec.storage_class_name or "",
                csi=k8s.V1CSIPersistentVolumeSource(driver=DRIVER, volume_handle=name),
                claim_ref=k8s.V1ObjectReference(
                    api_version="v1",
                    kind="PersistentVolumeClaim",
                    namespace=pvc.metadata.namespace,
                    name=pvc.metadata.name,
                    uid=pvc.metadata.uid,
                ),
            ),
        )
        try:
            self.core.create_persistent_volume(body)
        except k8s.ApiException as e:
            if e.status != 409:
                raise
        return name

    def _reclaim_policy(self, pvc: Any) -> str:
        wanted = pvc.spec.storage_class_name
        classes: list[Any] = self.storage.list_storage_class().items
        for cls in classes:
            annotations = cls.metadata.annotations or {}
            if cls.metadata.name == wanted or (not wanted and annotations.get(DEFAULT_CLASS)):
                return str(cls.reclaim_policy or "Delete")
        return "Delete"

    # Every volume ----------------------------------------------------------------

    def reclaim(self, keep: set[str]) -> None:
        """Release or delete the volumes whose claim is gone, free volumes whose claimRef
        was cleared, and remove the directories of volumes that no longer exist (but
        those in ``keep``: a running guest's, a claim-less VM's)."""
        # Volumes first: a volume listed has a claim made before it, which the claims'
        # list then shows unless it is gone.
        volumes: list[Any] = self.core.list_persistent_volume().items
        listed: list[Any] = self.core.list_persistent_volume_claim_for_all_namespaces().items
        claims = {(c.metadata.namespace, c.metadata.name, c.metadata.uid) for c in listed}
        for volume in volumes:
            self._reclaim_one(volume, claims)
        live = {v.metadata.name for v in volumes}
        for disk in self.disks.iterdir():
            if disk.name in live or disk.name in keep:
                continue
            log.info("disk %s is gone with its volume", disk.name)
            shutil.rmtree(disk, ignore_errors=True)

    def _reclaim_one(self, volume: Any, claims: set[tuple[Any, Any, Any]]) -> None:
        name, ref = volume.metadata.name, volume.spec.claim_ref
        phase = volume.status.phase if volume.status else None
        if volume.metadata.deletion_timestamp is not None:
            return
        if ref is None or not ref.uid:
            if phase != "Available":
                self.core.patch_persistent_volume_status(name, {"status": {"phase": "Available"}})
            return
        if (ref.namespace, ref.name, ref.uid) in claims:
            return
        if phase != "Released":
            self.core.patch_persistent_volume_status(name, {"status": {"phase": "Released"}})
        if volume.spec.persistent_volume_reclaim_policy == "Delete":
            log.info("volume %s is deleted with its claim (reclaimPolicy Delete)", name)
            or_none(lambda: self.core.delete_persistent_volume(name))
