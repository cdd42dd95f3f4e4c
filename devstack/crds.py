"""The real CRDs of the APIs dbi writes, from their projects' Go modules at pinned versions.

The stand-in serves KubeVirt's ``VirtualMachine`` and ``VirtualMachineInstance``,
Harvester's ``VirtualMachineImage`` and the Prometheus Operator's monitors and rules
with the OpenAPI schemas those projects release, so the API server validates (and a
server-side apply refuses) every field dbi writes as a real cluster would.

The modules come from the Go module proxy (``go mod download``), as the control plane's
do, and are checked against the sums pinned here. KubeVirt generates its CRDs in Go
(``pkg/virt-operator/resource/generate/components``): the schemas are the
``CRDsValidation`` raw strings, the names and columns are those of ``crds.go``, copied
below. Harvester and the Prometheus Operator ship their CRDs as YAML files.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devstack import tools
from devstack.process import StackError

Doc = dict[str, Any]


@dataclass(frozen=True)
class Module:
    path: str
    version: str
    sum: str  # go.sum's h1: hash of the module's zip

    def __str__(self) -> str:
        return f"{self.path}@{self.version}"


# Harvester v1.6.0 runs KubeVirt v1.5.0 (its go.mod).
KUBEVIRT = Module(
    "kubevirt.io/kubevirt", "v1.5.0", "h1:J/vHB2rwXwf5/rQIjDmK+E7wZFg0TCxyl4o0btO6QeE="
)
HARVESTER = Module(
    "github.com/harvester/harvester", "v1.6.0", "h1:SlC7YQyheSXIeoc/ys/eYZ00HRXJsocHxMUEoXHI+fw="
)
PROMETHEUS_OPERATOR = Module(
    "github.com/prometheus-operator/prometheus-operator",
    "v0.85.0",
    "h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s=",
)
MODULES = (KUBEVIRT, HARVESTER, PROMETHEUS_OPERATOR)

KUBEVIRT_VALIDATIONS = "pkg/virt-operator/resource/generate/components/validations_generated.go"
READY = ".status.conditions[?(@.type=='Ready')].status"
# crds.go's NewVirtualMachineCrd and NewVirtualMachineInstanceCrd, v1 only.
KUBEVIRT_CRDS: dict[str, Doc] = {
    "virtualmachine": {
        "names": {"kind": "VirtualMachine", "shortNames": ["vm", "vms"]},
        "columns": [
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Status", "string", ".status.printableStatus"),
            ("Ready", "string", READY),
        ],
        "subresources": {"status": {}},
    },
    "virtualmachineinstance": {
        "names": {"kind": "VirtualMachineInstance", "shortNames": ["vmi", "vmis"]},
        "columns": [
            ("Age", "date", ".metadata.creationTimestamp"),
            ("Phase", "string", ".status.phase"),
            ("IP", "string", ".status.interfaces[0].ipAddress"),
            ("NodeName", "string", ".status.nodeName"),
            ("Ready", "string", READY),
        ],
        "subresources": None,
    },
}
HARVESTER_CRDS = (
    "deploy/charts/harvester-crd/templates/harvesterhci.io_virtualmachineimages.yaml",
)
PROMETHEUS_CRDS = tuple(
    f"example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
    for plural in ("servicemonitors", "podmonitors", "prometheusrules")
)
# A Go raw string literal cannot hold a backtick, so this match is exact.
_RAW_ENTRY = re.compile(r'^\t"(\w+)": `([^`]*)`', re.MULTILINE)


def real_crds() -> list[Doc]:
    """Return the CRDs, from Go's module cache (downloaded on first use)."""
    return render({module: download(module) for module in MODULES})


def download(module: Module) -> Path:
    """Fetch the module into Go's module cache; return its directory."""
    proc = subprocess.run(
        [tools.go(), "mod", "download", "-json", str(module)],
        capture_output=True,
        text=True,
        check=False,
    )
    info = json.loads(proc.stdout) if proc.stdout.strip() else {}
    if proc.returncode != 0 or "Error" in info:
        raise StackError(f"go mod download {module} failed: {info.get('Error') or proc.stderr}")
    if info.get("Sum") != module.sum:
        raise StackError(f"{module} has sum {info.get('Sum')}, pinned {module.sum}")
    return Path(info["Dir"])


def render(dirs: dict[Module, Path]) -> list[Doc]:
    """The CRDs from the modules' directories."""
    validations = dict(_RAW_ENTRY.findall((dirs[KUBEVIRT] / KUBEVIRT_VALIDATIONS).read_text()))
    docs = [_kubevirt(singular, validations[singular]) for singular in KUBEVIRT_CRDS]
    for module, files in ((HARVESTER, HARVESTER_CRDS), (PROMETHEUS_OPERATOR, PROMETHEUS_CRDS)):
        for name in files:
            doc = yaml.load((dirs[module] / name).read_text(), Loader=yaml.CSafeLoader)
            doc["metadata"].pop("annotations", None)
            docs.append(doc)
    return docs


def _kubevirt(singular: str, validation: str) -> Doc:
    crd = KUBEVIRT_CRDS[singular]
    plural = f"{singular}s"
    version: Doc = {
        "name": "v1",
        "served": True,
        "storage": True,
        "schema": yaml.load(validation, Loader=yaml.CSafeLoader),
        "additionalPrinterColumns": [
            {"name": n, "type": t, "jsonPath": p} for n, t, p in crd["columns"]
        ],
    }
    if crd["subresources"] is not None:
        version["subresources"] = crd["subresources"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.kubevirt.io"},
        "spec": {
            "group": "kubevirt.io",
            "scope": "Namespaced",
            "names": {
                **crd["names"],
                "listKind": f"{crd['names']['kind']}List",
                "plural": plural,
                "singular": singular,
                "categories": ["all"],
            },
            "versions": [version],
        },
    }
