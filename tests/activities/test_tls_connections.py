"""TLS to PostgreSQL on the local stack: apps verify the instance's certificate with the
Secret's ``ca.crt`` (``sslmode=verify-full``) and plaintext is refused; dbi's own
connections verify too; a short-lived certificate is renewed in the running server
(sessions stay, the VM does not restart); a lost CA ends with a new one, served after
the restart the Deferred policy holds for ``dbi resize --force``."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import pytest_asyncio
from cryptography import x509
from kubernetes import client as k8s
from temporalio.client import Client

from activities.infra import postgres, trust
from dbi import bootstrap, names, tls
from dbi.config import Config
from devstack.stack import StackInfo
from tests.activities.admin_credentials import credential, uid_of
from tests.activities.endpoint import vm_address
from tests.activities.lifecycle import SPEC, create, ready, vmi_uid
from tests.activities.logins import secret
from tests.appclient import conninfo, with_ca
from tests.dbi_command import dbi
from tests.orchestrator import Orchestrator, watching
from tests.stack import Kubectl
from watcher.watcher import Watcher
from workflows.worker import ACTIVITY_THREADS, build_worker, step_activities

pytestmark = pytest.mark.stack

HOME = Config().namespace


def served_fingerprint(address: str | None) -> str | None:
    der = trust.served(address).der if address else None
    return tls.fingerprint(der) if der else None


def boot_data_fingerprint(kube_api: Any, namespace: str) -> str:
    """The fingerprint of the certificate in instance ``db``'s boot data."""
    doc = bootstrap.from_userdata(secret(kube_api, namespace, "db-cloudinit")["userdata"])
    assert doc.server_cert is not None
    return tls.fingerprint(doc.server_cert)


def encrypted(info: str, **options: Any) -> bool:
    """Connect with ``info`` and tell whether the session is encrypted."""
    with psycopg.connect(info, connect_timeout=3, **options) as conn:
        row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
        return bool(row and row[0])


async def test_clients_verify_the_certificate_and_plaintext_is_refused(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any, tmp_path: Path
) -> None:
    await create(orchestrator, namespace)
    data = secret(kube_api, namespace, "db-credentials")
    assert data["sslmode"] == "verify-full"
    assert "sslmode=verify-full" in data["uri"] and "sslmode=verify-full" in data["jdbc-uri"]
    ca = x509.load_pem_x509_certificate(data["ca.crt"].encode())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert encrypted(conninfo(data))  # the uri and ca.crt, as an app has them

    # Fails closed: without the CA, with another CA, for another name, in plaintext.
    with pytest.raises(psycopg.OperationalError, match="root certificate file"):
        encrypted(data["uri"], sslrootcert=str(tmp_path / "absent.crt"))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        encrypted(with_ca(data["uri"], tls.new_ca("elsewhere").cert_pem))
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        encrypted(conninfo(data), host="db.elsewhere.svc")
    with pytest.raises(psycopg.OperationalError, match="no encryption"):
        encrypted(data["uri"], sslmode="disable")

    # The certificate the guest serves names the Service, signed by the Secret's CA.
    address = vm_address(kube_api, namespace)
    assert address is not None
    served = trust.served(address)
    assert served.der is not None
    sans = x509.load_der_x509_certificate(served.der).extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert set(sans.value.get_values_for_type(x509.DNSName)) == set(
        tls.service_names(namespace, "db")
    )
    assert tls.judge(served.der, data["ca.crt"], tls.service_names(namespace, "db")).trusted

    # dbi's own connections verify: the right name connects, another is refused.
    admin = credential(kube_api, uid_of(orchestrator, namespace))["password"]
    ca_file = trust.trust_file(data["ca.crt"])
    right = postgres.Server(address, names.service_host(namespace, "db"), ca_file)
    assert postgres.login(right, password=admin) is postgres.Login.OK
    wrong = postgres.Server(address, "db.elsewhere.svc", ca_file)
    assert postgres.login(wrong, password=admin) is postgres.Login.UNREACHABLE
    with (
        pytest.raises(psycopg.OperationalError, match="does not match host name"),
        postgres.connect(wrong, password=admin),
    ):
        pass
    assert orchestrator.condition(namespace, "db", "TLSReady") == ("True", "TLSReady")


@pytest_asyncio.fixture(loop_scope="session")
async def short_lived_certificates(
    temporal_client: Client,
    local_stack: StackInfo,
    kubectl: Kubectl,
    kube_api: Any,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Orchestrator]:
    """A worker (and a watcher) whose certificates live 90 s: renewed 60 s after issue,
    with 30 s (three health checks) to install it before it expires (20 s was missed
    once on a loaded CI machine: the expired certificate then restarted the VM)."""
    monkeypatch.setenv("DBI_TLS_CERT_LIFETIME", "90s")
    queue = f"dbi-test-tls-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(max_workers=ACTIVITY_THREADS) as executor:
        activities = step_activities(local_stack.kubeconfig)
        worker = build_worker(temporal_client, activities, task_queue=queue, executor=executor)
        async with worker:
            orchestrator = Orchestrator(temporal_client, queue, kubectl)
            async with watching(orchestrator, kube_api, namespace):
                yield orchestrator


@pytest.mark.usefixtures("images")  # the CRD and the images, as the session's worker has
async def test_a_short_lived_certificate_is_renewed_in_the_running_server(
    short_lived_certificates: Orchestrator, kube_api: Any, namespace: str
) -> None:
    orchestrator = short_lived_certificates
    await create(orchestrator, namespace, {**SPEC, "healthCheckInterval": "10s"})
    data = secret(kube_api, namespace, "db-credentials")
    address = vm_address(kube_api, namespace)
    first = served_fingerprint(address)
    assert first is not None
    vmi = vmi_uid(kube_api, namespace)
    held = psycopg.connect(conninfo(data), connect_timeout=3, autocommit=True)
    try:
        renewed = await orchestrator.until(
            lambda: (fp := served_fingerprint(address)) not in (None, first) and fp,
            timeout=150,
            what="a renewed certificate served",
        )
        assert held.execute("SELECT 1").fetchone() == (1,)  # the session stayed
    finally:
        held.close()
    # New clients verify the new certificate with the same Secret; no restart.
    assert encrypted(conninfo(secret(kube_api, namespace, "db-credentials")))
    assert vmi_uid(kube_api, namespace) == vmi
    assert vm_address(kube_api, namespace) == address
    assert renewed == boot_data_fingerprint(kube_api, namespace)
    await ready(orchestrator, namespace)


async def test_a_lost_ca_is_replaced_and_served_after_a_forced_restart(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """The namespace's CA deleted: dbi makes a new one and a certificate from it; the
    guest still serves the old one, which dbi no longer trusts, so the private key is
    not sent over that connection: the VM restarts into its boot data, which Deferred
    holds until `dbi resize --force`. Apps then verify with the Secret's new ca.crt."""
    await create(orchestrator, namespace, {**SPEC, "resizePolicy": "Deferred"})
    old = secret(kube_api, namespace, "db-credentials")["ca.crt"]
    before = vmi_uid(kube_api, namespace)
    k8s.CoreV1Api(kube_api).delete_namespaced_secret(trust.ca_name(namespace), HOME)
    held = ("False", "RestartRequired")
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "TLSReady") == held,
        what="TLSReady False RestartRequired",
    )
    assert vmi_uid(kube_api, namespace) == before
    forced = await asyncio.to_thread(dbi, local_stack, "resize", "db", "-n", namespace, "--force")
    assert forced.returncode == 0, forced.stderr
    await ready(orchestrator, namespace)
    data = secret(kube_api, namespace, "db-credentials")
    assert data["ca.crt"] != old
    assert encrypted(conninfo(data))
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        encrypted(with_ca(data["uri"], old))
    assert orchestrator.condition(namespace, "db", "TLSReady") == ("True", "TLSReady")
    assert served_fingerprint(vm_address(kube_api, namespace)) == boot_data_fingerprint(
        kube_api, namespace
    )


async def test_a_namespace_made_again_under_its_name_gets_a_ca_of_its_own(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> None:
    """A namespace's CA records the namespace's UID: deleted and created again under the
    same name (another tenant's, perhaps), the namespace's first instance gets a new CA,
    so a client that trusted the old namespace's instances trusts none of the new one's."""
    core = k8s.CoreV1Api(kube_api)
    async with watching(orchestrator, kube_api, namespace):
        await create(orchestrator, namespace)
        old_ca = secret(kube_api, HOME, trust.ca_name(namespace))["tls.crt"]
        await orchestrator.delete(namespace, "db")
    await asyncio.to_thread(core.delete_namespace, namespace)

    def gone() -> bool:
        try:
            core.read_namespace(namespace)
        except k8s.ApiException as e:
            return bool(e.status == 404)
        return False

    await orchestrator.until(gone, timeout=90, what="the namespace gone")
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=namespace)))
    async with watching(orchestrator, kube_api, namespace):
        await create(orchestrator, namespace)
    new_ca = secret(kube_api, HOME, trust.ca_name(namespace))["tls.crt"]
    assert new_ca != old_ca
    assert secret(kube_api, namespace, "db-credentials")["ca.crt"] == new_ca
