"""What the benchmark observes: instances and VMs becoming ready (by watching them), the API
server's request counter, a process's CPU time and peak memory, Prometheus endpoints."""

from __future__ import annotations

import math
import os
import threading
import time
import urllib.request
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from dbi import names
from dbi.streams import Listener, Source, forever

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Tracker:
    """Watch the objects of one namespace and record when each first met a condition.

    ``first[key]`` is the monotonic time ``check(obj)`` first returned ``key`` among its
    keys (for a DBInstance: (name, generation) once that generation is converged and Ready).
    """

    def __init__(
        self,
        api: k8s.ApiClient,
        source: Source,
        check: Callable[[dict[str, Any]], Iterable[Hashable]],
    ):
        self.first: dict[Any, float] = {}
        self.stop = threading.Event()
        self._check = check
        self._lock = threading.Lock()
        threading.Thread(
            target=forever, args=(api, source, Listener(self._on), self.stop), daemon=True
        ).start()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # also when a scenario fails

    def _on(self, event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED":
            return
        now = time.monotonic()
        keys = self._check(obj)
        with self._lock:
            for key in keys:
                self.first.setdefault(key, now)

    def count(self, keys: set[Any]) -> int:
        with self._lock:
            return len(keys & self.first.keys())


def converged(obj: dict[str, Any]) -> list[tuple[str, int]]:
    """(name, generation) of a DBInstance whose current generation is converged and Ready."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    if status.get("observedGeneration") != generation:
        return []
    for c in status.get("conditions", []):
        if c["type"] == "Ready" and c["status"] == "True":
            return [(obj["metadata"]["name"], generation)]
    return []


def vm_ready(obj: dict[str, Any]) -> list[str]:
    return [obj["metadata"]["name"]] if (obj.get("status") or {}).get("ready") else []


def vm_stages(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """("created", name) for any VM seen, and ("ready", name) once the stand-in reports it
    ready (its guest accepts connections)."""
    name = obj["metadata"]["name"]
    return [("created", name), *(("ready", n) for n in vm_ready(obj))]


def instances(api: k8s.ApiClient, namespace: str) -> Source:
    objects = k8s.CustomObjectsApi(api)
    return Source(
        "DBInstance",
        objects.list_namespaced_custom_object,
        (names.GROUP, names.VERSION, namespace, names.PLURAL),
    )


def vms(api: k8s.ApiClient, namespace: str) -> Source:
    objects = k8s.CustomObjectsApi(api)
    return Source(
        "VirtualMachine",
        objects.list_namespaced_custom_object,
        ("kubevirt.io", "v1", namespace, "virtualmachines"),
    )


def parse(text: str) -> Samples:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def total(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for (n, found), v in samples.items() if n == name and set(labels.items()) <= found)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 (our own endpoint)
        return parse(response.read().decode())


def apiserver_metrics(api: k8s.ApiClient) -> Samples:
    response = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}/metrics")
    return parse(response.data.decode())


def apiserver_requests(api: k8s.ApiClient) -> float:
    """The API server's own count of requests it has served (apiserver_request_total)."""
    return total(apiserver_metrics(api), "apiserver_request_total")


def api_traffic(samples: Samples) -> dict[str, float]:
    """Requests served by verb and resource ("GET virtualmachines/status"), and watch
    events sent by resource ("watch events virtualmachines"), from the API server's
    metrics."""
    traffic: dict[str, float] = {}
    for (name, labels), value in samples.items():
        found = dict(labels)
        if name == "apiserver_request_total":
            resource = "/".join(filter(None, (found.get("resource"), found.get("subresource"))))
            key = f"{found.get('verb', '?')} {resource or found.get('path', '?')}"
        elif name == "apiserver_watch_events_total":
            key = f"watch events {found.get('resource', '?')}"
        else:
            continue
        traffic[key] = traffic.get(key, 0.0) + value
    return traffic


class APIWindow:
    """What the API server served in a window: requests in all, and requests and watch
    events by kind (``api_traffic``), from one scrape of its metrics at each end."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api
        self._before = apiserver_metrics(api)

    def used(self) -> tuple[float, dict[str, float]]:
        after = apiserver_metrics(self.api)
        requests = total(after, "apiserver_request_total") - total(
            self._before, "apiserver_request_total"
        )
        return requests, difference(api_traffic(after), api_traffic(self._before))


def difference(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    """``after - before`` key by key, leaving out what did not change."""
    changed = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return {k: v for k, v in sorted(changed.items(), key=lambda kv: -kv[1]) if v > 0}


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()

    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _process_cpu(stat: Path) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, CPU seconds of its reaped children) from a stat file."""
    try:
        fields = stat.read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None  # gone meanwhile
    ticks = os.sysconf("SC_CLK_TCK")
    own = (int(fields[11]) + int(fields[12])) / ticks
    return int(fields[1]), own, (int(fields[13]) + int(fields[14])) / ticks


def cpu_by_part(roots: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each part: a root process itself, its children that
    have exited ("<part> exited children": initdb) and those alive ("<part> children":
    the PostgreSQL servers, with the backends they have reaped).

    The difference of two calls is the CPU each part used in between, as long as the
    children that exit in between are reaped within the part.
    """
    table: dict[int, tuple[int, float, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (found := _process_cpu(entry / "stat")) is not None:
            table[int(entry.name)] = found
    part_of = {pid: name for name, pid in roots.items()}
    used = {
        key: 0.0 for name in roots for key in (name, f"{name} exited children", f"{name} children")
    }
    for pid, (_, own, reaped) in table.items():
        ancestor, hops = pid, 0
        while ancestor not in part_of and ancestor in table and hops < 64:
            ancestor, hops = table[ancestor][0], hops + 1
        if ancestor not in part_of:
            continue
        name = part_of[ancestor]
        if pid == ancestor:
            used[name] += own
            used[f"{name} exited children"] += reaped
        else:
            used[f"{name} children"] += own + reaped
    return used


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has spent not idle, all cores together (/proc/stat)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / ticks


class CPUWindow:
    """CPU seconds each part of the stack (and the machine as a whole) uses in a window."""

    def __init__(self, roots: dict[str, int]) -> None:
        self.roots = roots
        self._parts = cpu_by_part(roots)
        self._machine = machine_busy_seconds()
        self._wall = time.monotonic()

    def used(self) -> dict[str, float]:
        """Seconds used since the window opened, per part; ``machine`` is every process,
        ``capacity`` what the cores could have given (wall time times cores)."""
        now = cpu_by_part(self.roots)
        used = {name: max(0.0, now[name] - self._parts[name]) for name in now}
        used["machine"] = machine_busy_seconds() - self._machine
        used["capacity"] = (time.monotonic() - self._wall) * (os.cpu_count() or 1)
        return used


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    return _status_mib(pid, "VmHWM")


def rss_mib(pid: int) -> float:
    """The process's resident set now (VmRSS), in MiB."""
    return _status_mib(pid, "VmRSS")


def _status_mib(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(f"{key}:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]
