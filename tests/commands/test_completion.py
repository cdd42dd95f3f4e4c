"""Shell completion: `dbi completion bash|zsh` prints a script, and the command line
answers the shell's completion requests (argcomplete's protocol), as bash does it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from commands import completion
from dbi import names
from devstack import tools
from devstack.stack import StackInfo


def complete(line: str, tmp_path: Path, **env: str) -> list[str]:
    """What `dbi` offers for ``line`` with the cursor at its end (``env`` added)."""
    answer = tmp_path / "answer"
    subprocess.run(
        [str(tools.venv_tool("dbi"))],
        env={**os.environ, **completion.request(line, answer), **env},
        check=True,
        capture_output=True,
        timeout=60,
    )
    return [word.strip() for word in answer.read_text().splitlines()]


def test_commands_and_their_options_complete(tmp_path: Path) -> None:
    assert complete("dbi sta", tmp_path) == ["status"]
    assert set(complete("dbi describe --temporal-", tmp_path)) == {
        "--temporal-address",
        "--temporal-namespace",
    }
    assert complete("dbi status -o ", tmp_path) == ["json", "yaml"]


def kubectl_completes(*words: str, **env: str) -> list[str]:
    """What kubectl's own completion answers for ``kubectl WORDS`` (the last one being
    completed), with dbi's scripts on PATH as an install puts them beside kubectl-dbi."""
    bin_dir = tools.venv_tool("dbi").parent
    done = subprocess.run(
        [str(tools.venv_tool("kubectl")), "__complete", *words],
        env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return done.stdout.splitlines()


def test_kubectl_completes_its_dbi_plugin() -> None:
    """kubectl (1.26+) completes `kubectl dbi ...` by running kubectl_complete-dbi and
    reading Cobra's format: the completions, then the directive (4: no file names)."""
    assert kubectl_completes("dbi", "sta") == ["status", ":4"]
    assert kubectl_completes("dbi", "status", "-o", "") == ["json", "yaml", ":4"]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_script_registers_dbi(shell: str) -> None:
    script = subprocess.run(
        [str(tools.venv_tool("dbi")), "completion", shell],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "_python_argcomplete" in script
    registered = "complete -o" if shell == "bash" else "compdef"
    assert registered in script and "dbi" in script


@pytest.mark.stack
def test_instance_names_complete_from_the_cluster(
    local_stack: StackInfo, kube_api: Any, namespace: str, dbinstance_crd: str, tmp_path: Path
) -> None:
    """NAME completes from the DBInstances of the namespace -n names (else the
    context's); a cluster that does not answer completes nothing, without an error."""
    for name in ("orders", "orders-archive", "users"):
        body = {
            "apiVersion": f"{names.GROUP}/{names.VERSION}",
            "kind": names.KIND,
            "metadata": {"name": name},
            "spec": {"version": 18, "resources": {"cpu": 1, "memory": "1Gi", "storage": "1Gi"}},
        }
        k8s.CustomObjectsApi(kube_api).create_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, body
        )
    config = {"KUBECONFIG": local_stack.kubeconfig}
    assert complete(f"dbi describe -n {namespace} ord", tmp_path, **config) == [
        "orders",
        "orders-archive",
    ]
    assert complete(f"dbi psql -n {namespace} u", tmp_path, **config) == ["users"]
    assert complete("dbi describe -n default ord", tmp_path, **config) == []
    assert kubectl_completes("dbi", "describe", "-n", namespace, "orders-", **config) == [
        "orders-archive",
        ":4",
    ]
    assert complete(f"dbi describe -n {namespace} ord", tmp_path, KUBECONFIG="/nope") == []
