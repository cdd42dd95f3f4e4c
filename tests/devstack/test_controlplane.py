"""The local Kubernetes control plane behaves as the orchestrator needs a real one to."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.polling import eventually
from tests.stack import Kubectl

pytestmark = pytest.mark.stack


def _gone(read: Callable[[], object]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            read()
        except k8s.ApiException as e:
            if e.status == 404:
                return True
            raise
        return False

    return check


def test_readyz_answers_ok(kubectl: Kubectl) -> None:
    """`kubectl get --raw /readyz` from the wheel's kubectl answers ok."""
    assert kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


def test_kubectl_applies_a_crd_and_a_custom_object(kubectl: Kubectl, namespace: str) -> None:
    """A CRD applied with kubectl serves custom objects that kubectl can then read back."""
    group = f"{namespace}.test.dbi.dev"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    try:
        kubectl("wait", "--for=condition=Established", f"crd/widgets.{group}", "--timeout=60s")
        widget = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": namespace},
            "spec": {"size": 3},
        }
        kubectl("apply", "-f", "-", stdin=json.dumps(widget))
        got = json.loads(
            kubectl("get", f"widgets.{group}", "w1", "-n", namespace, "-o", "json").stdout
        )
        assert got["spec"] == {"size": 3}
    finally:
        kubectl("delete", "crd", f"widgets.{group}", "--wait=false")


def _apply_secret(core: Any, namespace: str, *, uid: str | None, password: str) -> Any:
    metadata: dict[str, Any] = {"name": "creds", "namespace": namespace}
    if uid is not None:
        metadata["uid"] = uid
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "stringData": {"password": password},
    }
    return core.patch_namespaced_secret(
        "creds",
        namespace,
        body,
        field_manager="dbi-test",
        force=True,
        _content_type="application/apply-patch+yaml",
    )


def test_apply_naming_the_uid_of_a_deleted_secret_conflicts(kube_api: Any, namespace: str) -> None:
    """A server-side apply that names a Secret's UID fails with 409 once that Secret is gone."""
    core = k8s.CoreV1Api(kube_api)
    created = _apply_secret(core, namespace, uid=None, password="first")  # noqa: S106
    uid = created.metadata.uid
    # While the Secret exists, naming its UID is an ordinary update.
    _apply_secret(core, namespace, uid=uid, password="second")  # noqa: S106

    core.delete_namespaced_secret("creds", namespace)
    with pytest.raises(k8s.ApiException) as raised:
        _apply_secret(core, namespace, uid=uid, password="third")  # noqa: S106
    assert raised.value.status == 409
    # Nothing was recreated with the stale UID's data.
    assert _gone(lambda: core.read_namespaced_secret("creds", namespace))()


def test_deleting_an_owner_collects_its_dependents(kube_api: Any, namespace: str) -> None:
    """The garbage collector deletes a Secret whose owner reference names a deleted owner."""
    core = k8s.CoreV1Api(kube_api)
    owner = core.create_namespaced_config_map(
        namespace, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="owner"))
    )
    assert owner.metadata is not None and owner.metadata.uid is not None
    ref = k8s.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid, controller=True
    )
    core.create_namespaced_secret(
        namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="owned", owner_references=[ref]))
    )
    core.create_namespaced_secret(
        namespace, k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="unowned"))
    )

    core.delete_namespaced_config_map("owner", namespace)

    eventually(
        _gone(lambda: core.read_namespaced_secret("owned", namespace)),
        timeout=60,
        what="garbage collection of the owned Secret",
    )
    survivor = core.read_namespaced_secret("unowned", namespace)
    assert survivor.metadata is not None and survivor.metadata.name == "unowned"


def test_deleting_a_namespace_removes_its_objects(kube_api: Any, namespace: str) -> None:
    """The namespace controller empties a deleted namespace, and the namespace then goes."""
    core = k8s.CoreV1Api(kube_api)
    doomed = f"{namespace}-doomed"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=doomed)))
    core.create_namespaced_config_map(doomed, k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="cm")))

    core.delete_namespace(doomed)

    eventually(
        _gone(lambda: core.read_namespace(doomed)), timeout=90, what="deletion of the namespace"
    )
    eventually(
        _gone(lambda: core.read_namespaced_config_map("cm", doomed)),
        timeout=5,
        what="deletion of the ConfigMap",
    )
