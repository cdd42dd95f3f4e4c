"""What the benchmark observes: instances and VMs becoming ready (by watching them), the API
server's request counter, a process's CPU time and peak memory, Prometheus endpoints."""

from __future__ import annotations

import math
import os
import threading
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from dbi import names
from watcher.streams import Source, forever

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Tracker:
    """Watch the objects of one namespace and record when each first met a condition.

    ``first[key]`` is the monotonic time ``check(obj)`` first returned ``key`` (for a
    DBInstance: (name, generation) once that generation is converged and Ready).
    """

    def __init__(self, api: k8s.ApiClient, source: Source, check: Callable[[dict[str, Any]], Any]):
        self.first: dict[Any, float] = {}
        self.stop = threading.Event()
        self._check = check
        self._lock = threading.Lock()
        threading.Thread(
            target=forever, args=(api, source, self._on, self.stop), daemon=True
        ).start()

    def __enter__(self) -> Tracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()  # also when a scenario fails

    def _on(self, event: str, obj: dict[str, Any]) -> None:
        if event == "DELETED":
            return
        key = self._check(obj)
        if key is not None:
            with self._lock:
                self.first.setdefault(key, time.monotonic())

    def count(self, keys: set[Any]) -> int:
        with self._lock:
            return len(keys & self.first.keys())


def converged(obj: dict[str, Any]) -> tuple[str, int] | None:
    """(name, generation) of a DBInstance whose current generation is converged and Ready."""
    status = obj.get("status") or {}
    generation = obj["metadata"].get("generation")
    if status.get("observedGeneration") != generation:
        return None
    for c in status.get("conditions", []):
        if c["type"] == "Ready" and c["status"] == "True":
            return (obj["metadata"]["name"], generation)
    return None


def vm_ready(obj: dict[str, Any]) -> str | None:
    return obj["metadata"]["name"] if (obj.get("status") or {}).get("ready") else None


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


def apiserver_requests(api: k8s.ApiClient) -> float:
    """The API server's own count of requests it has served (apiserver_request_total)."""
    response = api.rest_client.pool_manager.request("GET", f"{api.configuration.host}/metrics")
    return total(parse(response.data.decode()), "apiserver_request_total")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()

    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def peak_rss_mib(pid: int) -> float:
    """The process's peak resident set (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]
