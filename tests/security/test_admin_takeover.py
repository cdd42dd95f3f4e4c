"""A tenant cannot take another instance's superuser or data, nor choose its own
instance's superuser password: the adopt annotation, a Secret and a claim in the
tenant's namespace are claims dbi checks against what only it, or the cluster, wrote
(docs/security.md)."""

from __future__ import annotations

import json

import psycopg
import pytest

from activities.infra.admin_credential import name_for
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


def test_a_claim_naming_another_tenants_volume_gets_nothing_of_it(
    tenancy: Tenancy, orders: str
) -> None:
    """Mallory makes her instance's data claim herself, naming the victim's volume and
    annotated as her instance's, under deletionPolicy Retain; the volume is not bound to
    it (its claimRef names the victim's claim), so dbi never marks, relabels or
    releases it: not while her instance runs, not when she deletes it."""
    victims_claim = tenancy.get(tenancy.victim, "orders-data", "persistentvolumeclaim")
    volume = victims_claim["spec"]["volumeName"]
    before = tenancy.get("", volume, "persistentvolume")
    ns = tenancy.mallory
    paused = {names.PAUSED_ANNOTATION: "true"}
    tenancy.tenant(
        "apply",
        "-n",
        ns,
        "-f",
        "-",
        stdin=instance("grab", annotations=paused, deletionPolicy="Retain"),
    )
    uid = tenancy.get(ns, "grab")["metadata"]["uid"]
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "grab-data",
            "labels": {names.INSTANCE_LABEL: "grab"},
            "annotations": {names.INSTANCE_UID_ANNOTATION: uid},
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "volumeName": volume,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    tenancy.tenant("apply", "-n", ns, "-f", "-", stdin=json.dumps(claim))
    tenancy.tenant("annotate", "dbinstance", "grab", "-n", ns, f"{names.PAUSED_ANNOTATION}-")

    def vm_made() -> bool:  # on her claim, which never binds: the VM never starts
        return (tenancy.condition(ns, "grab", "VMProvisioned") or {}).get("status") == "True"

    tenancy.until(vm_made, what="grab's VM made on her claim")
    tenancy.tenant("delete", "dbinstance", "grab", "-n", ns, "--timeout=180s")
    after = tenancy.get("", volume, "persistentvolume")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["spec"]["claimRef"]["name"] == "orders-data"
