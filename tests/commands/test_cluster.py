"""What a command says when the cluster does not serve it (plain data): the cause in a
sentence naming where it looked, never a response's headers or body dump."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import urllib3
from kubernetes import client as k8s

from commands.cluster import Kube, failure, unconfigured


def refused(status: int, reason: str, body: str) -> k8s.ApiException:
    error = k8s.ApiException(status=status, reason=reason)
    error.body = body
    error.headers = {"Audit-Id": "a-header-no-one-needs"}
    return error


@pytest.mark.parametrize(
    ("error", "said"),
    [
        pytest.param(
            refused(404, "Not Found", "404 page not found"),
            "serves no dbinstances.dbi.dev: is the CRD installed?",
            id="no-crd",
        ),
        pytest.param(
            refused(
                403, "Forbidden", json.dumps({"message": 'dbinstances is forbidden: User "x"'})
            ),
            "refused (403 Forbidden): dbinstances is forbidden",
            id="rbac",
        ),
        pytest.param(
            urllib3.exceptions.MaxRetryError(
                urllib3.HTTPConnectionPool("127.0.0.1", 1),
                "/apis",
                urllib3.exceptions.NewConnectionError(
                    urllib3.connection.HTTPConnection("127.0.0.1", 1), "refused"
                ),
            ),
            "did not answer (NewConnectionError",
            id="unreachable",
        ),
    ],
)
def test_a_cluster_that_does_not_serve_the_command_is_said_in_a_sentence(
    error: Exception, said: str, tmp_path: Path
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text("{}")
    shown = failure(Kube(str(config)), error)
    assert said in shown and str(config) in shown
    assert "Audit-Id" not in shown and "HTTP response" not in shown


def test_a_kubeconfig_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert unconfigured(Kube(str(missing)), ValueError("x")) == (
        f"dbi: kubeconfig {missing} does not exist"
    )
