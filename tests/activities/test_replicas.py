"""Replicas on the stack (spec.instances): three members Ready, each replica cloned
from the primary and streaming; a row written through ``<name>-rw`` is read through
``<name>-ro``, which refuses a write; ``<name>`` still reaches the primary; the status
lists the members; scaling down removes a member's VM, disks and slot; the API server
refuses unsetting instances and a version change with replicas; the instance's
deletion takes the replicas."""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from typing import Any

import psycopg
import pytest
from kubernetes import client as k8s
from psycopg.conninfo import make_conninfo

from activities.infra.trust import trust_file
from devstack.stack import StackInfo
from tests import dbi_command
from tests.activities.declared import admin
from tests.activities.lifecycle import KUBEVIRT, SPEC, create, custom, ready
from tests.appclient import with_ca
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
    # An instance that exists, scaled up: its certificate gains -rw's name first.
    await _scaled_up(orchestrator, namespace)
    status = orchestrator.get(namespace, "db")["status"]
    assert status["primary"] == "db"
    members = {m["name"]: m for m in status["members"]}
    assert sorted(members) == ["db", "db-2", "db-3"]
    assert members["db"]["role"] == "Primary" and members["db"]["ready"]
    for name in ("db-2", "db-3"):  # each its own VM and data disk
        assert (members[name]["role"], members[name]["state"]) == ("Replica", "Streaming")
        assert members[name]["ready"] and custom(kube_api, namespace, "virtualmachines", name)
        k8s.CoreV1Api(kube_api).read_namespaced_persistent_volume_claim(f"{name}-data", namespace)

    with psycopg.connect(_through(kube_api, namespace, "db-rw"), autocommit=True) as rw:
        rw.execute("CREATE TABLE orders (n int)")
        rw.execute("INSERT INTO orders SELECT generate_series(1, 100)")
        assert rw.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
    with psycopg.connect(_through(kube_api, namespace, "db"), autocommit=True) as primary:
        assert primary.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)

    # The credentials Secret's ro-uri reaches a replica, verify-full, as an app uses it.
    secret = k8s.CoreV1Api(kube_api).read_namespaced_secret("db-credentials", namespace)
    data = {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}
    assert "@db-ro." in data["ro-uri"]
    ro_uri = with_ca(data["ro-uri"], data["ca.crt"])

    def replicated() -> bool:
        try:
            ro = psycopg.connect(ro_uri, autocommit=True)
        except psycopg.OperationalError:  # the replica (re)starting
            return False
        with ro:
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

    # A replica whose disk is lost (its VM and claim deleted) is cloned again.
    await _lose_a_disk(orchestrator, kube_api, namespace)
    await orchestrator.until(replicated, what="the rows on the new clone")

    # The API server keeps instances set, and keeps version while there are replicas.
    for spec, refusal in (
        (SPEC, "instances, once set, stays set"),
        ({**SPEC, "instances": 2, "version": 17}, "version cannot change while instances"),
    ):
        with pytest.raises(AssertionError, match=refusal):
            orchestrator.apply(namespace, "db", spec)

    # The instance's deletion takes its replicas, whatever deletionPolicy keeps.
    await orchestrator.delete(namespace, "db")

    def members_gone() -> bool:
        claims = k8s.CoreV1Api(kube_api).list_namespaced_persistent_volume_claim(
            namespace, label_selector="dbi.dev/member"
        )
        return not custom(kube_api, namespace, "virtualmachines", "db-2") and not claims.items

    await orchestrator.until(members_gone, what="db-2's VM and disks deleted")


async def _scaled_up(orchestrator: Orchestrator, namespace: str) -> None:
    await create(orchestrator, namespace, SPEC)
    orchestrator.apply(namespace, "db", {**SPEC, "instances": 3})
    await ready(orchestrator, namespace)


async def _lose_a_disk(orchestrator: Orchestrator, kube_api: Any, namespace: str) -> None:
    """Delete db-2's VM and data claim; wait until it streams from a new claim."""
    core = k8s.CoreV1Api(kube_api)
    lost = core.read_namespaced_persistent_volume_claim("db-2-data", namespace).metadata
    assert lost is not None
    k8s.CustomObjectsApi(kube_api).delete_namespaced_custom_object(
        *KUBEVIRT, namespace, "virtualmachines", "db-2"
    )
    core.delete_namespaced_persistent_volume_claim("db-2-data", namespace)

    def recloned() -> bool:
        claim = core.list_namespaced_persistent_volume_claim(
            namespace, field_selector="metadata.name=db-2-data"
        ).items
        status = orchestrator.get(namespace, "db").get("status") or {}
        streaming = [m["name"] for m in status.get("members") or [] if m["state"] == "Streaming"]
        fresh = bool(claim) and claim[0].metadata is not None and claim[0].metadata.uid != lost.uid
        return fresh and streaming == ["db-2"]

    await orchestrator.until(recloned, what="db-2 cloned again onto a new disk")


def _primaries(kube_api: Any, namespace: str, creds: dict[str, str]) -> list[str]:
    """The members that answer as a primary now (each asked at its VMI's address)."""
    found = []
    for member in ("db", "db-2", "db-3"):
        vmi = custom(kube_api, namespace, "virtualmachineinstances", member)
        interfaces = (vmi.get("status") or {}).get("interfaces") or []
        address = interfaces[0].get("ipAddress") if interfaces else None
        if not address:
            continue
        conninfo = _through(kube_api, namespace, "db", **creds) + f" hostaddr={address}"
        try:
            with psycopg.connect(conninfo, connect_timeout=1, autocommit=True) as conn:
                if conn.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,):
                    found.append(member)
        except psycopg.OperationalError:
            continue
    return found


class _Traffic:
    """Numbered rows committed through db-rw (reconnecting as an app would), and which
    members answer as a primary, every 0.2 s, until stopped."""

    def __init__(self, kube_api: Any, namespace: str, creds: dict[str, str]) -> None:
        self.kube_api, self.namespace, self.creds = kube_api, namespace, creds
        self.committed: list[int] = []
        self.primaries: list[list[str]] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._write), threading.Thread(target=self._poll)]

    def __enter__(self) -> _Traffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join()

    def _write(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                conninfo = _through(self.kube_api, self.namespace, "db-rw")
                with psycopg.connect(conninfo, autocommit=True) as c:
                    while not self.stop.is_set():
                        n += 1
                        c.execute("INSERT INTO ticks (n) VALUES (%s)", (n,))
                        self.committed.append(n)
                        time.sleep(0.02)
            except psycopg.Error:
                time.sleep(0.2)

    def _poll(self) -> None:
        while not self.stop.is_set():
            self.primaries.append(_primaries(self.kube_api, self.namespace, self.creds))
            time.sleep(0.2)


async def test_a_switchover_under_writes_keeps_every_commit_and_one_primary(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    await create(orchestrator, namespace, {**SPEC, "instances": 3})
    creds = admin(kube_api, orchestrator, namespace)
    with psycopg.connect(_through(kube_api, namespace, "db-rw"), autocommit=True) as rw:
        rw.execute("CREATE TABLE ticks (n int PRIMARY KEY, at timestamptz DEFAULT now())")

    with _Traffic(kube_api, namespace, creds) as traffic:
        await asyncio.sleep(2)
        args = ("switchover", "db", "-n", namespace, "--to", "db-2", "--timeout", "2m")
        ran = await asyncio.to_thread(dbi_command.dbi, local_stack, *args)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert ran.stdout.startswith("switched over: db-2 is the primary"), ran.stdout
        assert orchestrator.get(namespace, "db")["status"]["primary"] == "db-2"
        at = len(traffic.committed)
        await orchestrator.until(
            lambda: len(traffic.committed) > at + 20, what="writes go on through db-rw"
        )
        after = await ready(orchestrator, namespace)

    # Exactly one primary at every look (none while the switch ran is allowed).
    seen = traffic.primaries
    assert all(len(p) <= 1 for p in seen), [p for p in seen if len(p) > 1]
    assert ["db"] in seen and ["db-2"] in seen
    # Every commit that returned is there, on the new primary.
    with psycopg.connect(_through(kube_api, namespace, "db-rw"), autocommit=True) as rw:
        assert rw.execute("SELECT NOT pg_is_in_recovery()").fetchone() == (True,)
        stored = {row[0] for row in rw.execute("SELECT n FROM ticks")}
        pause = rw.execute(
            "SELECT extract(epoch FROM max(gap)) FROM (SELECT at - lag(at) OVER (ORDER BY n)"
            " AS gap FROM ticks) AS gaps"
        ).fetchone()
    assert set(traffic.committed) <= stored
    assert pause is not None
    print(f"switchover: {len(traffic.committed)} commits, longest write pause {pause[0]:.1f} s")
    # The old primary rejoined as a replica and streams from db-2, as db-3 does.
    members = {m["name"]: m for m in after["status"]["members"]}
    assert members["db-2"]["role"] == "Primary"
    assert (members["db"]["role"], members["db"]["state"]) == ("Replica", "Streaming")
    assert members["db-3"]["state"] == "Streaming"
