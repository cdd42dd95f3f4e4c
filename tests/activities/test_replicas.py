"""Replicas on the stack (spec.instances): three members Ready, each replica cloned
from the primary and streaming; a row written through ``<name>-rw`` is read through
``<name>-ro``, which refuses a write; ``<name>`` still reaches the primary; the status
lists the members; scaling down removes a member's VM, disks and slot; the API server
refuses unsetting instances and a version change with replicas."""

from __future__ import annotations

import base64
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s
from psycopg.conninfo import make_conninfo

from activities.infra.trust import trust_file
from tests.activities.declared import admin
from tests.activities.lifecycle import SPEC, create, custom, ready
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


def _through(kube_api: Any, namespace: str, service: str, **as_user: str) -> str:
    """A verify-full connection to the Service ``service`` (its ClusterIP, its name for
    TLS) as the app user of instance ``db`` (or ``as_user``: user, password, dbname)."""
    core = k8s.CoreV1Api(kube_api)
    secret = core.read_namespaced_secret("db-credentials", namespace)
    data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
    spec = core.read_namespaced_service(service, namespace).spec
    assert spec is not None
    address = spec.cluster_ip
    return make_conninfo(
        host=f"{service}.{namespace}.svc",
        hostaddr=address,
        port=5432,
        user=as_user.get("user", data["username"]),
        password=as_user.get("password", data["password"]),
        dbname=as_user.get("dbname", data["dbname"]),
        sslmode="verify-full",
        sslrootcert=trust_file(data["ca.crt"]),
        connect_timeout=3,
    )


async def test_three_members_stream_and_serve_reads(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    instance = await create(orchestrator, namespace, {**SPEC, "instances": 3})
    status = instance["status"]
    assert status["primary"] == "db"
    members = {m["name"]: m for m in status["members"]}
    assert sorted(members) == ["db", "db-2", "db-3"]
    assert members["db"]["role"] == "Primary" and members["db"]["ready"]
    for name in ("db-2", "db-3"):
        assert members[name]["role"] == "Replica"
        assert members[name]["state"] == "Streaming" and members[name]["ready"]
    for name in ("db-2", "db-3"):  # each its own VM and data disk
        assert custom(kube_api, namespace, "virtualmachines", name)
        k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim(f"{name}-data", namespace)

    with psycopg.connect(_through(kube_api, namespace, "db-rw"), autocommit=True) as rw:
        rw.execute("CREATE TABLE orders (n int)")
        rw.execute("INSERT INTO orders SELECT generate_series(1, 100)")
        assert rw.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    with psycopg.connect(_through(kube_api, namespace, "db"), autocommit=True) as primary:
        assert primary.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)

    def replicated() -> bool:
        with psycopg.connect(_through(kube_api, namespace, "db-ro"), autocommit=True) as ro:
            assert ro.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
            found = ro.execute("SELECT to_regclass('orders') IS NOT NULL").fetchone()
            return found == (True,) and ro.execute("SELECT count(*) FROM orders").fetchone() == (
                100,
            )

    await orchestrator.until(replicated, what="the rows reach a replica through db-ro")
    with (
        psycopg.connect(_through(kube_api, namespace, "db-ro"), autocommit=True) as ro,
        pytest.raises(psycopg.errors.ReadOnlySqlTransaction),
    ):
        ro.execute("INSERT INTO orders VALUES (101)")

    # The primary's view: both replicas stream over TLS through their own slots.
    creds = admin(kube_api, orchestrator, namespace)
    with psycopg.connect(_through(kube_api, namespace, "db", **creds), autocommit=True) as conn:
        streaming = conn.execute(
            "SELECT application_name, ssl FROM pg_stat_replication JOIN pg_stat_ssl USING (pid)"
            " WHERE state = 'streaming' ORDER BY 1"
        ).fetchall()
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots ORDER BY 1").fetchall()
    assert streaming == [("db-2", True), ("db-3", True)]
    assert slots == [("dbi_db_2",), ("dbi_db_3",)]

    # Down to one member: db-3 goes, VM, disks and slot; db-2 stays.
    orchestrator.apply(namespace, "db", {**SPEC, "instances": 2})
    scaled = await ready(orchestrator, namespace)
    assert [m["name"] for m in scaled["status"]["members"]] == ["db", "db-2"]
    assert not custom(kube_api, namespace, "virtualmachines", "db-3")
    with psycopg.connect(_through(kube_api, namespace, "db", **creds), autocommit=True) as conn:
        slots = conn.execute("SELECT slot_name FROM pg_replication_slots").fetchall()
    assert slots == [("dbi_db_2",)]

    # The API server keeps instances set, and keeps version while there are replicas.
    for spec, refusal in (
        (SPEC, "instances, once set, stays set"),
        ({**SPEC, "instances": 2, "version": 17}, "version cannot change while instances"),
    ):
        with pytest.raises(AssertionError, match=refusal):
            orchestrator.apply(namespace, "db", spec)
