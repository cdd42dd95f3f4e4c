"""A port picked free but taken before a part of the stack binds it does not stop the stack.

``tools.free_port`` answers a port nothing listens on now; another process (a listener,
or an outgoing connection's ephemeral port) can take it before the part binds it. CI saw
the Temporal dev server exit with "bind: address already in use" for that reason. Each
test here takes the port first, as that other process would have, and holds it.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack import controlplane, tools
from devstack.controlplane import ControlPlane, ControlPlanePorts
from devstack.process import PORT_ATTEMPTS, PortTaken
from devstack.temporal import TemporalDevServer, serving

pytestmark = pytest.mark.stack


@pytest.fixture
def taken() -> Iterator[int]:
    """A port on 127.0.0.1 another process listens on."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def test_the_dev_server_starts_on_another_port_when_its_own_was_taken(
    tmp_path: Path, taken: int
) -> None:
    server = TemporalDevServer(
        data_dir=tmp_path, port=taken, ui_port=None, die_with_parent=True, search_attributes=False
    )
    try:
        server.start()
        assert server.port != taken
        assert server.address == f"127.0.0.1:{server.port}"
        assert asyncio.run(serving(server.address))
    finally:
        server.stop()
    assert "address already in use" in (tmp_path / "temporal.log").read_text()


def test_the_control_plane_starts_on_other_ports_when_one_of_its_own_was_taken(
    tmp_path: Path, taken: int
) -> None:
    plane = ControlPlane(
        binary=controlplane.build(),
        data_dir=tmp_path,
        ports=ControlPlanePorts(tools.free_port(), taken, tools.free_port()),
        die_with_parent=True,
    )
    try:
        plane.start()
        assert taken not in (plane.ports.apiserver, plane.ports.etcd, plane.ports.etcd_peer)
        assert plane.server == f"https://127.0.0.1:{plane.ports.apiserver}"
        assert f"127.0.0.1:{plane.ports.apiserver}" in (tmp_path / "kubeconfig").read_text()
    finally:
        plane.stop()


def test_a_port_taken_at_every_attempt_fails_naming_it(tmp_path: Path, taken: int) -> None:
    server = TemporalDevServer(
        data_dir=tmp_path, port=taken, ui_port=None, die_with_parent=True, search_attributes=False
    )
    server.repick = lambda: None  # type: ignore[method-assign]  # as if each new pick were taken too
    try:
        with pytest.raises(PortTaken, match=f"a port was taken: .*127.0.0.1:{taken}: bind"):
            server.start()
    finally:
        server.stop()
    assert (tmp_path / "temporal.log").read_text().count("address already in use") == PORT_ATTEMPTS
