"""What a tenant holding Kubernetes' edit role in its namespace may do with dbi, as the
aggregated roles of deploy/base/tenants.yaml grant it on a real API server: its own
DBInstances, reading and deleting (never making or changing) its DBBackups; nothing
of status, of dbi's namespace, or of another tenant's."""

from __future__ import annotations

import pytest

from tests.security.tenancy import Tenancy

pytestmark = pytest.mark.stack


def may(tenancy: Tenancy, verb: str, resource: str, namespace: str) -> bool:
    found = tenancy.tenant("auth", "can-i", verb, *resource.split(), "-n", namespace, check=False)
    assert found.returncode in (0, 1), found.stderr
    return found.returncode == 0


def test_a_tenant_may_use_dbi_in_its_namespace_and_nothing_beyond(tenancy: Tenancy) -> None:
    own, other, home = tenancy.mallory, tenancy.victim, tenancy.home
    allowed = [
        *[(v, "dbinstances.dbi.dev", own) for v in ("create", "patch", "delete", "list")],
        *[(v, "dbbackups.dbi.dev", own) for v in ("get", "list", "watch", "delete")],
        *[(v, "dbdatabases.dbi.dev", own) for v in ("create", "patch", "delete", "list")],
        *[(v, "dbroles.dbi.dev", own) for v in ("create", "patch", "delete", "list")],
    ]
    denied = [
        ("patch", "dbinstances.dbi.dev --subresource=status", own),
        ("update", "dbinstances.dbi.dev --subresource=status", own),
        *[(v, "dbbackups.dbi.dev", own) for v in ("create", "patch", "update")],
        ("patch", "dbbackups.dbi.dev --subresource=status", own),
        ("patch", "dbdatabases.dbi.dev --subresource=status", own),
        *[(v, "dbdatabases.dbi.dev", other) for v in ("get", "list", "create")],
        ("patch", "dbroles.dbi.dev --subresource=status", own),
        *[(v, "dbroles.dbi.dev", other) for v in ("get", "list", "create")],
        *[(v, "dbinstances.dbi.dev", other) for v in ("get", "list", "create")],
        *[(v, "dbbackups.dbi.dev", other) for v in ("get", "delete")],
        *[(v, "secrets", home) for v in ("get", "list")],
        ("get", "secrets", other),
        ("create", "leases.coordination.k8s.io", home),
        ("patch", "persistentvolumes", own),
    ]
    assert [a for a in allowed if not may(tenancy, *a)] == []
    assert [d for d in denied if may(tenancy, *d)] == []
