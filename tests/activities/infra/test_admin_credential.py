"""dbi's admin credential on the real stack: out of tenants' reach, recovered when lost,
rotated without the app noticing, and never two unknown passwords."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s

from activities.infra import admin_credential
from activities.infra.admin_credential import NEXT, RESET, name_for
from activities.infra.kube import Kube
from dbi import bootstrap, names, scram
from dbi.config import ADMIN_USER
from devstack.stack import StackInfo
from tests.activities.admin_credentials import HOME, credential, uid_of
from tests.activities.lifecycle import SPEC, create, ready, sql, vmi_uid
from tests.activities.logins import address, logs_in, secret, settled
from tests.appclient import conninfo
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def host_of(kube_api: Any, namespace: str) -> str:
    return address(secret(kube_api, namespace, "db-credentials"))


async def test_the_admin_credential_is_out_of_a_tenants_reach(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """A tenant ServiceAccount that may read every Secret of the instance's namespace
    finds no superuser password there (the cloud-init Secret holds its verifier only),
    and may not read dbi's namespace."""
    await create(orchestrator, namespace)
    admin = credential(kube_api, uid_of(orchestrator, namespace))["password"]
    core, rbac = k8s.CoreV1Api(kube_api), k8s.RbacAuthorizationV1Api(kube_api)
    core.create_namespaced_service_account(
        namespace, k8s.V1ServiceAccount(metadata=k8s.V1ObjectMeta(name="tenant"))
    )
    rbac.create_namespaced_role(
        namespace,
        k8s.V1Role(
            metadata=k8s.V1ObjectMeta(name="secrets-reader"),
            rules=[k8s.V1PolicyRule(api_groups=[""], resources=["secrets"], verbs=["get", "list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        namespace,
        k8s.V1RoleBinding(
            metadata=k8s.V1ObjectMeta(name="secrets-reader"),
            role_ref=k8s.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="secrets-reader"
            ),
            subjects=[k8s.RbacV1Subject(kind="ServiceAccount", name="tenant", namespace=namespace)],
        ),
    )
    tenant = f"system:serviceaccount:{namespace}:tenant"
    kubectl = orchestrator.kubectl
    can = kubectl("auth", "can-i", "get", "secrets", "-n", HOME, "--as", tenant, check=False)
    assert can.stdout.strip() == "no"
    every = kubectl("get", "secrets", "-n", namespace, "-o", "json", "--as", tenant).stdout
    decoded = [
        base64.b64decode(value).decode("utf-8", "replace")
        for item in json.loads(every)["items"]
        for value in (item.get("data") or {}).values()
    ]
    assert decoded, "the tenant reads the namespace's Secrets"
    assert all(admin not in text for text in decoded)
    userdata = secret(kube_api, namespace, "db-cloudinit")[bootstrap.USERDATA_KEY]
    doc = bootstrap.from_userdata(userdata)
    assert doc.admin_password is None and scram.verifies(admin, doc.admin_verifier or "")


async def test_a_lost_admin_credential_is_reset_in_the_guest_with_the_data_kept(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Deleting dbi's admin credential (no copy kept anywhere) makes dbi set a new one in
    the guest at a restart it asks for (resizePolicy Restart): Ready again, the rows
    intact, the new password the only one that works."""
    await create(orchestrator, namespace)
    sql(kube_api, namespace, "CREATE TABLE kept (n int)")
    sql(kube_api, namespace, "INSERT INTO kept VALUES (7)")
    uid, before = uid_of(orchestrator, namespace), vmi_uid(kube_api, namespace)
    old = credential(kube_api, uid)["password"]

    k8s.CoreV1Api(kube_api).delete_namespaced_secret(name_for(uid), HOME)
    await orchestrator.until(
        lambda: vmi_uid(kube_api, namespace) not in (None, before), what="the restart"
    )
    await ready(orchestrator, namespace)
    new = credential(kube_api, uid)
    host = host_of(kube_api, namespace)
    assert new["password"] != old and RESET not in json.dumps(new)
    assert logs_in(host, ADMIN_USER, new["password"], "postgres")
    assert not logs_in(host, ADMIN_USER, old, "postgres")
    assert sql(kube_api, namespace, "SELECT n FROM kept") == (7,)


async def test_a_reset_waits_for_a_forced_restart_under_deferred(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """Under resizePolicy Deferred the reset waits, saying so, until `dbi resize --force`."""
    await create(orchestrator, namespace, {**SPEC, "resizePolicy": "Deferred"})
    uid, before = uid_of(orchestrator, namespace), vmi_uid(kube_api, namespace)
    k8s.CoreV1Api(kube_api).delete_namespaced_secret(name_for(uid), HOME)
    held = ("False", "AdminResetHeld")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "AdminReady") == held,
        what="AdminReady False AdminResetHeld",
    )
    assert vmi_uid(kube_api, namespace) == before
    forced = await asyncio.to_thread(dbi, local_stack, "resize", "db", "-n", namespace, "--force")
    assert forced.returncode == 0, forced.stderr
    await ready(orchestrator, namespace)
    assert vmi_uid(kube_api, namespace) != before
    password = credential(kube_api, uid)["password"]
    assert logs_in(host_of(kube_api, namespace), ADMIN_USER, password, "postgres")


async def test_an_admin_rotation_goes_unnoticed_by_the_app(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """`dbi rotate --admin` sets a new admin password that works and the old one does not,
    while an app connection opened before keeps working, with no restart."""
    await create(orchestrator, namespace)
    app = await settled(orchestrator, namespace, kube_api)
    uid, before = uid_of(orchestrator, namespace), vmi_uid(kube_api, namespace)
    old = credential(kube_api, uid)["password"]
    with psycopg.connect(conninfo(app), connect_timeout=3, autocommit=True) as conn:
        rotated = await asyncio.to_thread(
            dbi, local_stack, "rotate", "db", "-n", namespace, "--admin"
        )
        assert rotated.returncode == 0, rotated.stderr
        assert conn.execute("SELECT 1").fetchone() == (1,)
    new = credential(kube_api, uid)
    host = host_of(kube_api, namespace)
    assert new["password"] != old and NEXT not in new
    assert logs_in(host, ADMIN_USER, new["password"], "postgres")
    assert not logs_in(host, ADMIN_USER, old, "postgres")
    assert logs_in(host, "app", app["password"], "app")
    assert vmi_uid(kube_api, namespace) == before
    assert new["password"] not in rotated.stdout + rotated.stderr


@pytest.mark.parametrize("altered", [False, True], ids=["before-alter-role", "after-alter-role"])
async def test_a_rotation_cut_short_ends_with_exactly_one_admin_password(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any, altered: bool
) -> None:
    """A rotation's worker killed after it wrote `next` (before or after ALTER ROLE, the
    state it leaves made here by hand) converges: `next` is finished or promoted, and
    exactly one admin password logs in, the credential's."""
    await create(orchestrator, namespace)
    uid = uid_of(orchestrator, namespace)
    old = credential(kube_api, uid)["password"]
    fresh = "a-rotation-cut-short-" + uid[:8]
    host = host_of(kube_api, namespace)
    if altered:
        with psycopg.connect(
            host=host, user=ADMIN_USER, password=old, dbname="postgres", sslmode="require"
        ) as c:
            c.execute(f"ALTER ROLE {ADMIN_USER} PASSWORD '{scram.verifier(fresh)}'".encode())
    # What the rotation's first write leaves, written as it writes it.
    instance = Kube(kube_api).instance(namespace, "db")
    assert instance is not None
    admin_credential.write(
        Kube(kube_api),
        HOME,
        instance,
        {"password": old, NEXT: fresh},
        annotations={},
        read_uid=None,
    )
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    await handle.signal("wake", {"reason": "test: a rotation was cut short"})

    def converged() -> bool:
        found = credential(kube_api, uid)
        return NEXT not in found and found["password"] == fresh

    await orchestrator.until(converged, what="the rotation finished")
    assert logs_in(host, ADMIN_USER, fresh, "postgres")
    assert not logs_in(host, ADMIN_USER, old, "postgres")
