"""The stand-in serves the real CRDs of the APIs dbi writes (``devstack/crds.py``): the
API server checks dbi's VirtualMachines, monitors and image manifests against KubeVirt's,
the Prometheus Operator's and Harvester's schemas, as a real cluster does."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from activities.infra import manifests, scrape
from activities.infra.kube import APPLY, Manifest
from images.build import manifest as image_manifest
from images.recipe import Recipe
from tests.activities.owned import instance

pytestmark = pytest.mark.stack


def dry_apply(api: Any, namespace: str, group_version: str, plural: str, body: Manifest) -> None:
    """Server-side apply ``body`` without storing it, refusing unknown fields."""
    group, version = group_version.split("/")
    k8s.CustomObjectsApi(api).patch_namespaced_custom_object(
        group,
        version,
        namespace,
        plural,
        body["metadata"]["name"],
        {**body, "metadata": {**body["metadata"], "namespace": namespace}},
        field_manager="dbi-test",
        force=True,
        dry_run="All",
        field_validation="Strict",
        _content_type=APPLY,
    )


def refusal(api: Any, namespace: str, group_version: str, plural: str, body: Manifest) -> str:
    with pytest.raises(ApiException) as refused:
        dry_apply(api, namespace, group_version, plural, body)
    return str(refused.value.body)


def test_the_vms_dbi_writes_fit_kubevirts_schema_and_a_wrong_field_is_refused(
    kube_api: Any, namespace: str
) -> None:
    """Two-disk and one-disk, running and halted: KubeVirt's schema takes them; a
    misspelt field and a string where KubeVirt wants an integer are refused by name."""
    db = instance()
    for root, strategy in (("db-root-abc", "Always"), (None, "Halted")):
        vm = manifests.vm(db, run_strategy=strategy, root_claim=root)
        dry_apply(kube_api, namespace, "kubevirt.io/v1", "virtualmachines", vm)

    misspelt = copy.deepcopy(vm)
    misspelt["spec"]["template"]["spec"]["domain"]["cpu"]["socket"] = 2
    assert ".cpu.socket" in refusal(
        kube_api, namespace, "kubevirt.io/v1", "virtualmachines", misspelt
    )
    mistyped = copy.deepcopy(vm)
    mistyped["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"] = "two"
    assert "sockets" in refusal(kube_api, namespace, "kubevirt.io/v1", "virtualmachines", mistyped)


def test_the_service_monitor_dbi_writes_fits_the_prometheus_operators_schema(
    kube_api: Any, namespace: str
) -> None:
    monitor = scrape.service_monitor(instance())
    dry_apply(kube_api, namespace, "monitoring.coreos.com/v1", "servicemonitors", monitor)
    wrong = copy.deepcopy(monitor)
    wrong["spec"]["endpoints"][0]["intervall"] = "30s"
    assert "intervall" in refusal(
        kube_api, namespace, "monitoring.coreos.com/v1", "servicemonitors", wrong
    )


def test_the_image_manifest_dbi_prints_fits_harvesters_schema(
    kube_api: Any, namespace: str
) -> None:
    """``dbi image manifest``'s VirtualMachineImage; without its sourceType (which
    Harvester requires) it is refused."""
    image = image_manifest(Recipe("17.11.0"), "0" * 128, url="https://images.example/db.qcow2")
    dry_apply(kube_api, namespace, "harvesterhci.io/v1beta1", "virtualmachineimages", image)
    without = copy.deepcopy(image)
    del without["spec"]["sourceType"]  # type: ignore[attr-defined]
    assert "sourceType" in refusal(
        kube_api, namespace, "harvesterhci.io/v1beta1", "virtualmachineimages", without
    )
