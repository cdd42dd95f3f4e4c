"""kube-proxy's part for the local stack: each Service's ClusterIP answers on the host.

Dev and test infrastructure, never used in production. The local control plane hands
out ClusterIPs from a range inside 127.0.0.0/8 (``devstack.stack``), which Linux
routes to the loopback interface, so the stand-in can listen on ``clusterIP:port`` of
every Service whose selector picks a stand-in VM's pods, and forward each connection
to the port of the VM's guest as it is at that moment. A VM that restarts on a new
address (as KubeVirt's does: a new virt-launcher pod) is reached through the same
ClusterIP by the next connection; connections open at the restart end, as they do
behind kube-proxy.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("devstack.vmstandin")

# Given a Service's namespace and selector: the address of the one running guest it
# selects, or None.
Backend = Callable[[str, dict[str, str]], str | None]
_CONNECT_SECONDS = 3.0


@dataclass(frozen=True)
class Route:
    """One Service port as the forwarder serves it."""

    namespace: str
    selector: tuple[tuple[str, str], ...]
    cluster_ip: str
    port: int
    target_port: int


def routes(service: dict[str, Any]) -> list[Route]:
    """The routes of a Service (a dict as the API sends it): none unless it has a
    selector and a ClusterIP in the loopback range, one per numeric target port."""
    meta, spec = service.get("metadata", {}), service.get("spec") or {}
    selector = spec.get("selector") or {}
    cluster_ip = spec.get("clusterIP") or ""
    try:
        loopback = ipaddress.ip_address(cluster_ip).is_loopback
    except ValueError:
        return []
    if not selector or not loopback:
        return []
    found = []
    for port in spec.get("ports") or []:
        target = port.get("targetPort", port["port"])
        if isinstance(target, int) and (port.get("protocol") or "TCP") == "TCP":
            found.append(
                Route(
                    meta.get("namespace", ""),
                    tuple(sorted(selector.items())),
                    cluster_ip,
                    int(port["port"]),
                    target,
                )
            )
    return found


@dataclass
class _Listener:
    route: Route
    sock: socket.socket
    stopped: threading.Event = field(default_factory=threading.Event)


class Forwarders:
    """A listening socket per Service port; ``sync`` makes them match the Services."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._by_service: dict[tuple[str, str], list[_Listener]] = {}
        self._lock = threading.Lock()

    def sync(self, event: str, service: dict[str, Any]) -> None:
        """Apply one watch event (ADDED, MODIFIED, DELETED) of a Service."""
        meta = service.get("metadata", {})
        key = (meta.get("namespace", ""), meta.get("name", ""))
        wanted = [] if event == "DELETED" else routes(service)
        with self._lock:
            current = self._by_service.pop(key, [])
            if [lst.route for lst in current] == wanted:
                self._by_service[key] = current
                return
            for listener in current:
                _close(listener)
            started = [lst for lst in (self._listen(route) for route in wanted) if lst]
            if started:
                self._by_service[key] = started

    def close(self) -> None:
        with self._lock:
            for listeners in self._by_service.values():
                for listener in listeners:
                    _close(listener)
            self._by_service.clear()

    def _listen(self, route: Route) -> _Listener | None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((route.cluster_ip, route.port))
        except OSError as e:  # another stack's Service holds it
            log.warning("cannot serve %s:%d: %s", route.cluster_ip, route.port, e)
            sock.close()
            return None
        sock.listen(64)
        listener = _Listener(route, sock)
        threading.Thread(
            target=self._accept, args=(listener,), name=f"svc-{route.cluster_ip}", daemon=True
        ).start()
        return listener

    def _accept(self, listener: _Listener) -> None:
        while not listener.stopped.is_set():
            try:
                client, _ = listener.sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(listener.route, client), daemon=True).start()

    def _serve(self, route: Route, client: socket.socket) -> None:
        address = self.backend(route.namespace, dict(route.selector))
        if address is None:
            client.close()  # no ready endpoint: refused, as kube-proxy's REJECT
            return
        try:
            upstream = socket.create_connection((address, route.target_port), _CONNECT_SECONDS)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)  # the timeout was the connect's: a session may idle
        threading.Thread(target=_pump, args=(upstream, client), daemon=True).start()
        _pump(client, upstream)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes until either side closes; then close both."""
    try:
        while data := source.recv(65536):
            sink.sendall(data)
    except OSError:
        pass
    finally:
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


def _close(listener: _Listener) -> None:
    listener.stopped.set()
    with contextlib.suppress(OSError):
        listener.sock.shutdown(socket.SHUT_RDWR)
    listener.sock.close()
