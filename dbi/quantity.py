"""Kubernetes quantities (``4Gi``, ``500m``) as exact decimals."""

from __future__ import annotations

from decimal import Decimal

from kubernetes.utils import quantity


def parse_quantity(value: str) -> Decimal:
    """Return the value of a Kubernetes quantity; raise ValueError if it is not one."""
    return Decimal(quantity.parse_quantity(value))
