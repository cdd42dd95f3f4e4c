"""A tenant's backup endpoint reaches only public addresses, or networks the operator
allows: judged on the URL as written, then on every address a name resolves to, before
any packet goes there; and a store's answer never becomes a message a tenant reads."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import urllib3

from activities.infra import backupstore, endpoints
from dbi.backups import StoreLocation
from dbi.config import Network
from tests.httpfake import serving

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)


@pytest.mark.parametrize(
    ("address", "networks", "allowed"),
    [
        pytest.param("203.0.113.9", (), False, id="documentation-range-is-not-public"),
        pytest.param("8.8.8.8", (), True, id="public-v4"),
        pytest.param("2001:4860:4860::8888", (), True, id="public-v6"),
        pytest.param("127.0.0.1", (), False, id="loopback"),
        pytest.param("10.43.0.1", (), False, id="a-service-ip"),
        pytest.param("192.168.1.5", (), False, id="private"),
        pytest.param("169.254.169.254", (), False, id="cloud-metadata"),
        pytest.param("100.64.0.1", (), False, id="carrier-grade-nat"),
        pytest.param("0.0.0.0", (), False, id="unspecified"),  # noqa: S104 (a value)
        pytest.param("::1", (), False, id="loopback-v6"),
        pytest.param("fd00::1", (), False, id="unique-local-v6"),
        pytest.param("fe80::1%eth0", (), False, id="link-local-v6-with-zone"),
        pytest.param("::ffff:10.0.0.1", (), False, id="v4-mapped-private"),
        pytest.param("224.0.0.1", (), False, id="multicast"),
        pytest.param("127.0.0.1", LOOPBACK, True, id="a-network-the-operator-allows"),
        pytest.param("10.43.0.1", LOOPBACK, False, id="only-that-network"),
    ],
)
def test_which_addresses_a_tenant_endpoint_may_reach(
    address: str, networks: tuple[Network, ...], allowed: bool
) -> None:
    assert endpoints.allowed(address, networks) is allowed


@pytest.mark.parametrize(
    ("endpoint", "refused"),
    [
        pytest.param("http://127.0.0.1:6443", True, id="a-literal-loopback"),
        pytest.param("https://[::1]:9000/", True, id="a-literal-v6"),
        pytest.param("http://169.254.169.254", True, id="the-metadata-service"),
        pytest.param("http://localhost:7233", True, id="localhost"),
        pytest.param("http://LOCALHOST.:7233", True, id="localhost-fqdn"),
        pytest.param("https://s3.example.com", False, id="a-name-is-judged-when-connected"),
        pytest.param("https://8.8.8.8", False, id="a-public-literal"),
    ],
)
def test_an_endpoint_written_as_a_refused_address_is_refused_naming_the_field(
    endpoint: str, refused: bool
) -> None:
    said = endpoints.refusal(endpoint, ())
    assert (said is not None) is refused
    if said is not None:
        assert said.startswith(endpoints.FIELD)


@pytest.fixture
def listener() -> Iterator[tuple[socket.socket, int]]:
    """A TCP socket on every local address that records whether anything connected."""
    sock = socket.socket()
    sock.bind(("0.0.0.0", 0))  # noqa: S104 (the host's own addresses, for the test)
    sock.listen()
    sock.settimeout(0.5)
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


def connected(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except TimeoutError:
        return False
    conn.close()
    return True


def test_a_name_resolving_to_a_refused_address_gets_no_packet(
    listener: tuple[socket.socket, int],
) -> None:
    """The host's own name resolves to one of its addresses (loopback or private): a
    request through the guarded pool is refused before it connects; with the network
    allowed, the same request connects."""
    sock, port = listener
    name = socket.gethostname()
    resolved = socket.gethostbyname(name)
    assert not endpoints.allowed(resolved, ()), f"{name} resolves to a public address"
    with pytest.raises(endpoints.EndpointRefused):
        endpoints.pool(()).request("GET", f"http://{name}:{port}/", retries=False, timeout=0.5)
    assert not connected(sock)
    allowing = (ipaddress.ip_network(f"{resolved}/32"),)
    with pytest.raises(urllib3.exceptions.HTTPError):  # it connected: nothing answers
        endpoints.pool(allowing).request(
            "GET", f"http://{name}:{port}/", retries=False, timeout=0.5
        )
    assert connected(sock)


class _Leaky(BaseHTTPRequestHandler):
    """A store that answers every request with an error page naming something internal."""

    def _answer(self) -> None:
        body = b"<html>internal-admin-token-42</html>"
        self.send_response(503)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = _answer

    def log_message(self, format: str, *args: object) -> None:
        return


def test_a_stores_answer_never_becomes_the_message(tmp_path: Path) -> None:
    """A failing request to a tenant's store raises StoreFailed saying the HTTP status
    only: the page the server sent is in no message (a tenant reads it in a DBBackup)."""
    with serving(_Leaky) as endpoint:
        store = backupstore.S3Store(
            StoreLocation.parse("s3://bucket/x/"),
            endpoint=endpoint,
            keys=("key", "secret"),
            networks=LOOPBACK,
        )
        (tmp_path / "f").write_bytes(b"x")
        calls: list[Callable[[], object]] = [
            lambda: store.read("a"),
            lambda: store.upload("a", tmp_path / "f"),
        ]
        for call in calls:
            with pytest.raises(backupstore.StoreFailed) as failed:
                call()
            assert "internal-admin-token" not in str(failed.value)
            assert "the backup store did not complete the request" in str(failed.value)
