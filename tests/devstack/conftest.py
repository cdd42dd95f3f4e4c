"""Fixtures of the local stack's own tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.devstack.standin import VMs


@pytest.fixture
def vms(kube_api: Any, namespace: str) -> VMs:
    """Stand-in VMs in this test's namespace, created as the orchestrator would."""
    return VMs(kube_api, namespace)
