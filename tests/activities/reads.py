"""Counting stand-ins for what a step reads (an instance and its reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from kubernetes import client as k8s

from activities.infra.kube import Instance


@dataclass
class _Instance:
    uid: str = "uid-1"
    name: str = "db"
    namespace: str = "team-a"
    deleting: bool = False
    unreadable: str | None = None
    viewed: bool = False


class _Reads:
    """Answers the instance reads ``Step.on`` makes, counting them, and keeps the Events
    it creates."""

    def __init__(self) -> None:
        self.reads = 0
        self.events: list[k8s.CoreV1Event] = []
        self.core = self

    def create_namespaced_event(self, namespace: str, body: k8s.CoreV1Event) -> None:
        self.events.append(body)

    def instance(self, namespace: str, name: str) -> Instance:
        self.reads += 1
        return cast(Instance, _Instance())
