"""Temporal over TLS and mTLS, configured the SDK's way (envconfig), on the real stack.

A TLS-terminating proxy in front of the dev server plays a secured Temporal (the dev
server itself serves plain gRPC): it presents a server certificate for
``temporal.test`` signed by a test CA and, for mTLS, requires a client certificate
signed by it. ``dbi temporal setup`` reaches Temporal through it with nothing but the
``TEMPORAL_*`` variables, or a profile in a TOML file; without the client certificate
the handshake is refused and the command says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client as k8s

from commands import target
from devstack import tools
from devstack.stack import StackInfo

pytestmark = pytest.mark.stack

SERVER_NAME = "temporal.test"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None = None,
    *,
    dns: str | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if dns:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(dns)]), critical=False
        )
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def make_pki(directory: Path) -> Pki:
    ca_key = _key()
    ca = _certificate("dbi test CA", ca_key)
    files = Pki(*(directory / n for n in ("ca.pem", "s.pem", "s.key", "c.pem", "c.key")))
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for cert_path, key_path, subject, dns in (
        (files.server_cert, files.server_key, SERVER_NAME, SERVER_NAME),
        (files.client_cert, files.client_key, "dbi-worker", None),
    ):
        key = _key()
        cert = _certificate(subject, key, (ca, ca_key), dns=dns)
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key_path, key)
    return files


@dataclass
class Proxy:
    port: int
    accepted: int = 0  # connections whose handshake (client certificate included) passed


@pytest_asyncio.fixture
async def mtls_temporal(local_stack: StackInfo, tmp_path: Path) -> AsyncIterator[tuple[Proxy, Pki]]:
    """A proxy that terminates mTLS and forwards to the stack's dev server."""
    async with proxied(local_stack, make_pki(tmp_path), mutual=True) as proxy:
        yield proxy


@pytest_asyncio.fixture
async def tls_temporal(local_stack: StackInfo, tmp_path: Path) -> AsyncIterator[tuple[Proxy, Pki]]:
    """A proxy that terminates TLS (no client certificate asked) in front of it."""
    async with proxied(local_stack, make_pki(tmp_path), mutual=False) as proxy:
        yield proxy


@contextlib.asynccontextmanager
async def proxied(
    local_stack: StackInfo, pki: Pki, *, mutual: bool
) -> AsyncIterator[tuple[Proxy, Pki]]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
    context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
    context.verify_mode = ssl.CERT_REQUIRED if mutual else ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    host, port = local_stack.temporal_address.rsplit(":", 1)
    proxy = Proxy(port=tools.free_port())

    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        proxy.accepted += 1
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", proxy.port, ssl=context)
    try:
        yield proxy, pki
    finally:
        server.close()


async def setup_through(env: dict[str, str]) -> tuple[int, str, str]:
    """Run `dbi temporal setup` with only ``env`` for Temporal (no TEMPORAL_* inherited)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    process = await asyncio.create_subprocess_exec(
        str(tools.venv_tool("dbi")),
        "temporal",
        "setup",
        env={**clean, "HOME": str(Path(env.get("HOME", "/nonexistent"))), **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 120)
    return process.returncode or 0, out.decode(), err.decode()


async def test_mtls_from_the_temporal_variables(mtls_temporal: tuple[Proxy, Pki]) -> None:
    proxy, pki = mtls_temporal
    env = {
        "TEMPORAL_ADDRESS": f"127.0.0.1:{proxy.port}",
        "TEMPORAL_TLS": "true",
        "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(pki.ca),
        "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        "TEMPORAL_TLS_CLIENT_CERT_PATH": str(pki.client_cert),
        "TEMPORAL_TLS_CLIENT_KEY_PATH": str(pki.client_key),
    }
    code, out, err = await setup_through(env)
    assert code == 0, err
    assert out.count("already registered") == 5
    accepted = proxy.accepted
    assert accepted >= 1

    without_client_certificate = {
        k: v for k, v in env.items() if not k.startswith("TEMPORAL_TLS_CLIENT")
    }
    code, out, err = await setup_through(without_client_certificate)
    assert code == 1
    assert "dbi: Temporal: Failed client connect" in err
    assert proxy.accepted == accepted  # refused in the handshake: no certificate


async def test_mtls_from_a_profile_file(mtls_temporal: tuple[Proxy, Pki], tmp_path: Path) -> None:
    proxy, pki = mtls_temporal
    profile = tmp_path / "temporal.toml"
    profile.write_text(
        "[profile.secured]\n"
        f'address = "127.0.0.1:{proxy.port}"\n'
        'namespace = "default"\n'
        "[profile.secured.tls]\n"
        f'server_ca_cert_path = "{pki.ca}"\n'
        f'server_name = "{SERVER_NAME}"\n'
        f'client_cert_path = "{pki.client_cert}"\n'
        f'client_key_path = "{pki.client_key}"\n'
    )
    env = {"TEMPORAL_CONFIG_FILE": str(profile), "TEMPORAL_PROFILE": "secured"}
    code, out, err = await setup_through(env)
    assert code == 0, err
    assert out.count("already registered") == 5


async def test_tls_and_server_name_as_the_installs_record_says(
    tls_temporal: tuple[Proxy, Pki],
    local_stack: StackInfo,
    kube_api: Any,
    namespace: str,
    dbinstance_crd: str,
) -> None:
    """Nothing configured but the cluster: the command takes Temporal's address, TLS and
    server name from the install's record (the chart's ConfigMap) and checks the server
    against the system's CAs (here SSL_CERT_FILE, the test CA). Without that CA the
    handshake fails, and the command says where the address came from."""
    proxy, pki = tls_temporal
    record = k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="dbi-temporal", labels={target.RECORD_LABEL: "true"}),
        data={
            "TEMPORAL_ADDRESS": f"127.0.0.1:{proxy.port}",
            "TEMPORAL_NAMESPACE": "default",
            "TEMPORAL_TLS": "true",
            "TEMPORAL_TLS_SERVER_NAME": SERVER_NAME,
        },
    )
    k8s.CoreV1Api(kube_api).create_namespaced_config_map(namespace, record)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}

    async def status(**env: str) -> tuple[int, str, str]:
        process = await asyncio.create_subprocess_exec(
            str(tools.venv_tool("dbi")),
            "status",
            "-n",
            namespace,
            "--dbi-namespace",
            namespace,
            env={**clean, "HOME": "/nonexistent", "KUBECONFIG": local_stack.kubeconfig, **env},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 120)
        return process.returncode or 0, out.decode(), err.decode()

    code, _, err = await status(SSL_CERT_FILE=str(pki.ca))
    assert code == 0, err
    assert proxy.accepted >= 1
    code, _, err = await status(SSL_CERT_FILE=str(pki.server_cert))  # not the CA
    assert code == 1
    said = f"Temporal at 127.0.0.1:{proxy.port} (ConfigMap {namespace}/dbi-temporal) did not"
    assert err.startswith(f"dbi: {said}"), err
