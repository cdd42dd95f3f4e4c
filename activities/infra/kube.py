"""Kubernetes access shared by the step activities (the official client, synchronous).

Activities run in the worker's thread pool, so blocking calls are fine there. Every
write is a server-side apply with the ``dbi-orchestrator`` field manager, or a
narrow patch of one field another step owns.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kubernetes import client as k8s

from activities.infra.reads import sharing
from activities.infra.views import Views
from dbi import names
from dbi.models import DBInstance
from dbi.spec import DeletionPolicy
from dbi.stored import annotations_of, identity, read

Manifest = dict[str, Any]
T = TypeVar("T")
APPLY = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
KUBEVIRT = ("kubevirt.io", "v1")


@dataclass(frozen=True)
class Instance:
    """A DBInstance as read from the API server: the model plus identity."""

    model: DBInstance
    uid: str
    generation: int
    deleting: bool
    finalizers: tuple[str, ...]
    # Why this worker's models cannot read the stored spec (a CRD newer or older than
    # the worker): the model then holds a stand-in spec that only a teardown may use.
    unreadable: str | None = None
    # Read from the worker's views (an idle pass's load): what a step does on it must
    # be confirmed on a fresh read (``rests_on_views``).
    viewed: bool = False

    @property
    def namespace(self) -> str:
        return str(self.model.metadata["namespace"])

    @property
    def name(self) -> str:
        return str(self.model.metadata["name"])

    @property
    def retains(self) -> bool:
        """Whether deletionPolicy is Retain: the VM, its data disk and the Secrets they
        need outlive the instance."""
        return self.model.spec.deletion_policy is DeletionPolicy.RETAIN

    @property
    def adopts(self) -> str | None:
        """The UID of a deleted instance whose retained objects this one may take over."""
        annotations = self.model.metadata.get("annotations") or {}
        return annotations.get(names.ADOPT_ANNOTATION) or None

    @property
    def annotations(self) -> dict[str, str]:
        return annotations_of(self.model)

    def owner_reference(self) -> Manifest:
        """Return the owner reference every child carries (the instance is its controller)."""
        return {
            "apiVersion": names.API_VERSION,
            "kind": names.KIND,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def child_metadata(self, name: str, *, kept: bool = False, **extra: Any) -> Manifest:
        """Return a child's metadata: the instance label and UID annotation, and an owner
        reference unless the child is one deletionPolicy Retain keeps (``kept``) and the
        policy is Retain: the garbage collector must not follow a reference to what no
        deletion path may take (docs/steps.md, "Ownership and deletion")."""
        annotations = {names.INSTANCE_UID_ANNOTATION: self.uid, **extra.pop("annotations", {})}
        metadata: Manifest = {
            "name": name,
            "namespace": self.namespace,
            "labels": {names.INSTANCE_LABEL: self.name},
            "annotations": annotations,
            **extra,
        }
        if not (kept and self.retains):
            metadata["ownerReferences"] = [self.owner_reference()]
        return metadata


class Kube:
    """The API calls the steps make, with the names and options they always use."""

    def __init__(self, api: k8s.ApiClient, views: Views | None = None) -> None:
        api.call_api = sharing(api.call_api, views)  # type: ignore[method-assign]
        self.api = api
        self.views = views
        self.core = k8s.CoreV1Api(api)
        self.objects = k8s.CustomObjectsApi(api)

    def set_finalizers(self, instance: Instance, finalizers: list[str]) -> None:
        """Write the instance's finalizers. A JSON merge patch replaces the list; the
        resourceVersion makes it fail (409) rather than drop a finalizer someone else
        added since the instance was read."""
        self.objects.patch_namespaced_custom_object(
            names.GROUP,
            names.VERSION,
            instance.namespace,
            names.PLURAL,
            instance.name,
            {
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": instance.model.metadata["resourceVersion"],
                }
            },
        )

    def instance(self, namespace: str, name: str) -> Instance | None:
        """Read a DBInstance; None when it does not exist."""
        raw = self.get_custom(names.GROUP, names.VERSION, namespace, names.PLURAL, name)
        return None if raw is None else instance_of(raw)

    def get_custom(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> Manifest | None:
        """Read a custom object; None when it does not exist."""
        found = or_none(
            lambda: self.objects.get_namespaced_custom_object(
                group, version, namespace, plural, name
            )
        )
        return None if found is None else cast(Manifest, found)

    def apply_custom(self, group: str, version: str, plural: str, manifest: Manifest) -> Manifest:
        meta = manifest["metadata"]
        applied = self.objects.patch_namespaced_custom_object(
            group, version, meta["namespace"], plural, meta["name"], manifest, **_APPLY
        )
        return cast(Manifest, applied)

    def create_custom(self, group: str, version: str, plural: str, manifest: Manifest) -> Manifest:
        """Create a custom object; 409 when one of its name exists."""
        meta = manifest["metadata"]
        created = self.objects.create_namespaced_custom_object(
            group, version, meta["namespace"], plural, manifest, field_manager=names.FIELD_MANAGER
        )
        return cast(Manifest, created)

    def patch_custom_status(
        self, group: str, version: str, plural: str, namespace: str, name: str, status: Manifest
    ) -> None:
        """Merge ``status`` into a custom object's status subresource."""
        self.objects.patch_namespaced_custom_object_status(
            group,
            version,
            namespace,
            plural,
            name,
            {"status": status},
            _content_type=MERGE_PATCH,
        )

    def list_custom(
        self, group: str, version: str, namespace: str, plural: str, selector: str
    ) -> list[Manifest]:
        """The custom objects of ``plural`` in ``namespace`` that match a label selector."""
        found = self.objects.list_namespaced_custom_object(
            group, version, namespace, plural, label_selector=selector
        )
        return list(cast(Manifest, found).get("items", []))

    def delete_custom(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> None:
        """Delete a custom object; one already gone is fine."""
        or_none(
            lambda: self.objects.delete_namespaced_custom_object(
                group, version, namespace, plural, name
            )
        )

    def secret(self, namespace: str, name: str) -> k8s.V1Secret | None:
        return or_none(lambda: self.core.read_namespaced_secret(name, namespace))

    def apply_secret(self, manifest: Manifest) -> k8s.V1Secret:
        """Apply a Secret; when its metadata names a UID, a deleted Secret gives 409."""
        meta = manifest["metadata"]
        return self.core.patch_namespaced_secret(
            meta["name"], meta["namespace"], manifest, **_APPLY
        )

    def service(self, namespace: str, name: str) -> Manifest | None:
        """A Service as a dict (what ``manifests.covers`` compares), or None."""
        found = or_none(lambda: self.core.read_namespaced_service(name, namespace))
        return None if found is None else dict(self.api.sanitize_for_serialization(found))

    def apply_service(self, manifest: Manifest) -> None:
        meta = manifest["metadata"]
        self.core.patch_namespaced_service(meta["name"], meta["namespace"], manifest, **_APPLY)

    def pvc(self, namespace: str, name: str) -> k8s.V1PersistentVolumeClaim | None:
        return or_none(lambda: self.core.read_namespaced_persistent_volume_claim(name, namespace))

    def pvcs(self, namespace: str, labels: dict[str, str]) -> list[k8s.V1PersistentVolumeClaim]:
        """The claims in ``namespace`` with all of ``labels``."""
        selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        found = self.core.list_namespaced_persistent_volume_claim(
            namespace, label_selector=selector
        )
        return list(found.items)

    def storage_class(self, name: str) -> k8s.V1StorageClass | None:
        return or_none(lambda: k8s.StorageV1Api(self.core.api_client).read_storage_class(name))

    def apply_pvc(self, manifest: Manifest) -> k8s.V1PersistentVolumeClaim:
        meta = manifest["metadata"]
        return self.core.patch_namespaced_persistent_volume_claim(
            meta["name"], meta["namespace"], manifest, **_APPLY
        )

    def patch(self, kind: str, namespace: str, name: str, body: Any) -> None:
        """Patch a child of ``kind``: a JSON patch when ``body`` is a list, else a JSON
        merge patch (lists replaced whole, ``None`` removes a field), for every kind."""
        content = JSON_PATCH if isinstance(body, list) else MERGE_PATCH
        if kind in CUSTOM_KINDS:
            group, version, plural = CUSTOM_KINDS[kind]
            self.objects.patch_namespaced_custom_object(
                group, version, namespace, plural, name, body, _content_type=content
            )
        else:
            method = getattr(self.core, f"patch_namespaced_{CORE_KINDS[kind]}")
            method(name, namespace, body, _content_type=content)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a child of ``kind``; one already gone is fine."""
        if kind in CUSTOM_KINDS:
            group, version, plural = CUSTOM_KINDS[kind]
            or_none(
                lambda: self.objects.delete_namespaced_custom_object(
                    group, version, namespace, plural, name
                )
            )
        else:
            method = getattr(self.core, f"delete_namespaced_{CORE_KINDS[kind]}")
            or_none(lambda: method(name, namespace))


# The kinds of an instance's children, by the API that serves them.
CUSTOM_KINDS = {
    "VirtualMachine": (*KUBEVIRT, "virtualmachines"),
    "VirtualMachineInstance": (*KUBEVIRT, "virtualmachineinstances"),
    "ServiceMonitor": ("monitoring.coreos.com", "v1", "servicemonitors"),
}
CORE_KINDS = {
    "Secret": "secret",
    "PersistentVolumeClaim": "persistent_volume_claim",
    "Service": "service",
}

# Server-side apply, as the orchestrator: it owns (and forces) the fields it sets.
_APPLY: dict[str, Any] = {
    "field_manager": names.FIELD_MANAGER,
    "force": True,
    "_content_type": APPLY,
}


def instance_of(raw: Manifest) -> Instance:
    """A DBInstance as the API server returned it (a read or a list's item)."""
    model, unreadable = read(raw)
    uid, generation, deleting = identity(raw)
    return Instance(
        model=model,
        uid=uid,
        generation=generation,
        deleting=deleting,
        finalizers=tuple(raw["metadata"].get("finalizers", [])),
        unreadable=unreadable,
    )


def or_none(read: Callable[[], T]) -> T | None:
    """Return what ``read`` returns, or None when the object does not exist (404)."""
    try:
        return read()
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise


def namespace_terminating(e: k8s.ApiException) -> bool:
    """Tell whether the API server refused to create an object because its namespace is
    being deleted (403, cause ``NamespaceTerminating``)."""
    if e.status != 403:
        return False
    try:
        causes = (json.loads(e.body or "{}").get("details") or {}).get("causes") or []
    except (ValueError, AttributeError):
        return False
    return any(c.get("reason") == "NamespaceTerminating" for c in causes if isinstance(c, dict))


def api_error(e: k8s.ApiException) -> str:
    """The API server's own words for a failed call: status code and the Status message
    (what was refused, on which object); never the request."""
    try:
        message = json.loads(e.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"{e.status} {e.reason}: {message}" if message else f"{e.status} {e.reason}"
