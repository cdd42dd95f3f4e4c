"""Run the VM stand-in: ``python -m devstack.vmstandin --kubeconfig K --data-dir D``.

Dev and test infrastructure only. It installs KubeVirt's, Harvester's and the
Prometheus Operator's CRDs (``devstack/crds.py``) and the default StorageClass of
deploy/dev/ (as KubeVirt and a storage provisioner install their own), then plays
KubeVirt and the storage provisioner until SIGTERM or SIGINT, when it shuts every
guest down.
"""

from __future__ import annotations

import argparse
import logging
import signal
import time
from pathlib import Path
from types import FrameType

import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from devstack import crds, tools
from devstack.vmstandin.controller import StandIn

log = logging.getLogger("devstack.vmstandin")
DEV = tools.REPO_ROOT / "deploy" / "dev"


def install_apis(api: k8s.ApiClient) -> None:
    """Apply the CRDs and the StorageClass, and wait until the API server serves the CRDs."""
    storage_class = yaml.safe_load((DEV / "storageclass.yaml").read_text())
    k8s.StorageV1Api(api).patch_storage_class(
        storage_class["metadata"]["name"],
        storage_class,
        field_manager="dbi-vm-standin",
        force=True,
        _content_type="application/apply-patch+yaml",
    )
    ext = k8s.ApiextensionsV1Api(api)
    names = []
    for doc in crds.real_crds():
        names.append(doc["metadata"]["name"])
        ext.patch_custom_resource_definition(
            doc["metadata"]["name"],
            doc,
            field_manager="dbi-vm-standin",
            force=True,
            _content_type="application/apply-patch+yaml",
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all(_established(ext.read_custom_resource_definition(n)) for n in names):
            return
        time.sleep(0.1)
    raise RuntimeError("the CRDs were not established within 60s")


def _established(crd: k8s.V1CustomResourceDefinition) -> bool:
    conditions = crd.status.conditions if crd.status is not None else None
    return any(c.type == "Established" and c.status == "True" for c in conditions or [])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m devstack.vmstandin", description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument(
        "--exporter", type=Path, help="postgres_exporter, run beside each process guest"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    api = k8s_config.new_client_from_config(config_file=args.kubeconfig)
    install_apis(api)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    stand_in = StandIn(api, args.data_dir.resolve(), exporter=args.exporter)

    def stop(signum: int, frame: FrameType | None) -> None:
        stand_in.stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    ready = args.data_dir / "ready"
    ready.unlink(missing_ok=True)
    stand_in.run(ready=lambda: ready.write_text("watching\n"))
    ready.unlink(missing_ok=True)
    log.info("stopped every guest")


if __name__ == "__main__":
    main()
