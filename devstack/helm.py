"""Helm, to render and lint dbi's chart (charts/dbi) in tests: helm.sh/helm/v4, pinned in
``helm/go.mod`` and built once per pin into the devstack cache, like the control plane.
Dev and test tooling."""

from __future__ import annotations

import subprocess
from pathlib import Path

from devstack import gobuild, tools

SOURCE_DIR = Path(__file__).resolve().parent / "helm"
PACKAGE = "helm.sh/helm/v4/cmd/helm"
CHART = tools.REPO_ROOT / "charts" / "dbi"


def build() -> Path:
    """Helm, built first if the cache lacks it."""
    return gobuild.build(SOURCE_DIR, "helm", what="helm", package=PACKAGE)


def template(namespace: str, *options: str, chart: Path = CHART) -> str:
    """``helm template dbi CHART -n NAMESPACE --include-crds OPTIONS``: the chart's objects
    as YAML. A value the chart's schema refuses raises CalledProcessError (its stderr says
    which)."""
    return run("template", "dbi", str(chart), "-n", namespace, "--include-crds", *options)


def run(*arguments: str) -> str:
    """``helm ARGUMENTS``' output; a failure raises CalledProcessError, its stderr in its
    message."""
    done = subprocess.run(
        [str(build()), *arguments], capture_output=True, text=True, env=_env(), check=False
    )
    if done.returncode != 0:
        raise subprocess.CalledProcessError(
            done.returncode, f"helm {arguments[0]}: {done.stderr.strip()}", done.stdout, done.stderr
        )
    return done.stdout


def _env() -> dict[str, str]:
    """Helm's state in the devstack cache, never in ~/.config or ~/.cache (and its API
    discovery cache, $HOME/.kube/cache, there too)."""
    home = tools.CACHE_DIR / "helm-home"
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
