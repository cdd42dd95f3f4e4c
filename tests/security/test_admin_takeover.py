"""A tenant cannot take another instance's superuser, nor choose its own instance's:
the adopt annotation and a Secret in the tenant's namespace are claims dbi checks
against what only it wrote (docs/security.md)."""

from __future__ import annotations

import psycopg
import pytest

from activities.admin_credential import name_for
from dbi import names
from dbi.config import ADMIN_USER
from tests.appclient import conninfo
from tests.security.tenancy import Tenancy, instance

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def orders(tenancy: Tenancy) -> str:
    """The victim's instance, Ready; its UID."""
    tenancy.admin("apply", "-n", tenancy.victim, "-f", "-", stdin=instance("orders"))
    return str(tenancy.ready(tenancy.victim, "orders")["metadata"]["uid"])


def test_adopting_another_tenants_instance_takes_nothing(tenancy: Tenancy, orders: str) -> None:
    """Mallory's instance annotated to adopt the victim's UID stalls, naming that UID;
    the victim's admin credential stays where it was, unchanged, and no credential of
    Mallory's holds its password; the victim stays Ready."""
    credential = name_for(orders)
    before = tenancy.get(tenancy.home, credential, "secret")
    thief = instance("thief", annotations={names.ADOPT_ANNOTATION: orders})
    tenancy.tenant("apply", "-n", tenancy.mallory, "-f", "-", stdin=thief)

    stalled = tenancy.stalled(tenancy.mallory, "thief")
    assert stalled["reason"] == "AdoptionRefused", stalled
    assert orders in stalled["message"]
    after = tenancy.get(tenancy.home, credential, "secret")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    victims = tenancy.secret(tenancy.home, credential)
    assert victims is not None
    thief_uid = tenancy.get(tenancy.mallory, "thief")["metadata"]["uid"]
    thiefs = tenancy.secret(tenancy.home, name_for(thief_uid)) or {}
    assert thiefs.get("password") != victims["password"]
    ready = tenancy.condition(tenancy.victim, "orders", "Ready")
    assert ready is not None and ready["status"] == "True", ready


def test_a_secret_the_tenant_writes_never_becomes_the_admin_credential(
    tenancy: Tenancy,
) -> None:
    """Mallory creates her instance paused, writes `<name>-admin` with a password of her
    choosing and the instance's UID, and unpauses: the instance becomes Ready with an
    admin credential dbi made, and her password does not log in as dbi's admin."""
    ns = tenancy.mallory
    paused = instance("mine", annotations={names.PAUSED_ANNOTATION: "true"})
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=paused)
    uid = tenancy.get(ns, "mine")["metadata"]["uid"]
    chosen = "mallory-chose-this-password-1"
    tenancy.tenant(
        "create", "secret", "generic", "mine-admin", "-n", ns, f"--from-literal=password={chosen}"
    )
    tenancy.tenant(
        "annotate", "secret", "mine-admin", "-n", ns, f"{names.INSTANCE_UID_ANNOTATION}={uid}"
    )
    tenancy.tenant("annotate", "dbinstance", "mine", "-n", ns, f"{names.PAUSED_ANNOTATION}-")

    tenancy.ready(ns, "mine")
    made = tenancy.secret(tenancy.home, name_for(uid))
    assert made is not None and made["password"] not in ("", chosen)
    app = tenancy.secret(ns, "mine-credentials")
    assert app is not None
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(conninfo(app), user=ADMIN_USER, password=chosen, connect_timeout=5)
    assert tenancy.secret(ns, "mine-admin") is not None  # hers: dbi did not touch it
