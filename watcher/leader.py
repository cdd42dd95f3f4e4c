"""Leader election on a coordination.k8s.io Lease: several watchers run, one signals.

The leader renews the Lease every third of its duration; a replica that finds the
Lease unrenewed for longer than its duration takes it over (an update naming the
resourceVersion it read, so two cannot both win). A leader that fails to renew in time
steps down before another can take over.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from kubernetes import client as k8s

log = logging.getLogger("dbi.watcher")
# Every Lease request's (connect, read) timeout: a hung call must not hold the loop
# that steps down a leader that cannot renew.
TIMEOUT = (5.0, 5.0)


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class LeaderElection:
    api: k8s.ApiClient
    namespace: str
    identity: str
    name: str = "dbi-watcher"
    duration: float = 15.0
    leading: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    # When the API server last answered the Lease loop, and what it said last.
    answered: datetime | None = None
    error: str = "not tried yet"

    def run(self) -> None:
        """Try to acquire or renew the Lease until ``stop``; keep ``leading`` current."""
        coordination = k8s.CoordinationV1Api(self.api)
        renewed_at = _now()
        while not self.stop.is_set():
            try:
                if self._try(coordination):
                    renewed_at = _now()
                self.answered, self.error = _now(), ""
            except k8s.ApiException as e:
                log.info("lease %s/%s: %s", self.namespace, self.name, e.reason)
                self.answered, self.error = _now(), str(e.reason)  # it answered, with a no
            except Exception as e:  # the API server unreachable: try again next period
                log.warning("lease %s/%s: %s", self.namespace, self.name, type(e).__name__)
                self.error = type(e).__name__
            if self.leading.is_set() and _now() - renewed_at > timedelta(
                seconds=self.duration * 2 / 3
            ):
                log.warning("could not renew the lease in time; stepping down")
                self.leading.clear()
            self.stop.wait(self.duration / 3)
        self._release(coordination)

    def problem(self) -> str | None:
        """Why a standby is not ready: its Lease loop has not reached the API server
        for two Lease durations (it could not take over)."""
        if self.answered is not None and _now() - self.answered <= timedelta(
            seconds=self.duration * 2
        ):
            return None
        return f"standby, and the Lease loop cannot reach the API server ({self.error})"

    def _try(self, coordination: k8s.CoordinationV1Api) -> bool:
        """Acquire or renew; return True when this replica holds the Lease now."""
        try:
            lease = coordination.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=TIMEOUT
            )
        except k8s.ApiException as e:
            if e.status != 404:
                raise
            coordination.create_namespaced_lease(
                self.namespace, self._lease(transitions=0), _request_timeout=TIMEOUT
            )
            return self._lead()
        spec = lease.spec or k8s.V1LeaseSpec()
        mine = spec.holder_identity == self.identity
        renewed = spec.renew_time or spec.acquire_time
        expired = renewed is None or _now() - renewed > timedelta(
            seconds=spec.lease_duration_seconds or self.duration
        )
        if not (mine or expired or not spec.holder_identity):
            self.leading.clear()
            return False
        transitions = (spec.lease_transitions or 0) + (0 if mine else 1)
        body = self._lease(transitions=transitions, acquired=spec.acquire_time if mine else None)
        body.metadata = k8s.V1ObjectMeta(
            name=self.name,
            namespace=self.namespace,
            resource_version=lease.metadata.resource_version if lease.metadata else None,
        )
        # 409 if another won
        coordination.replace_namespaced_lease(
            self.name, self.namespace, body, _request_timeout=TIMEOUT
        )
        return self._lead()

    def _lead(self) -> bool:
        if not self.leading.is_set():
            log.info("leading as %s", self.identity)
        self.leading.set()
        return True

    def _lease(self, *, transitions: int, acquired: datetime | None = None) -> k8s.V1Lease:
        now = _now()
        return k8s.V1Lease(
            metadata=k8s.V1ObjectMeta(name=self.name, namespace=self.namespace),
            spec=k8s.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=int(self.duration),
                acquire_time=acquired or now,
                renew_time=now,
                lease_transitions=transitions,
            ),
        )

    def _release(self, coordination: k8s.CoordinationV1Api) -> None:
        """Give the Lease up on a clean stop, so another replica takes over at once."""
        if not self.leading.is_set():
            return
        self.leading.clear()
        try:
            lease = coordination.read_namespaced_lease(
                self.name, self.namespace, _request_timeout=TIMEOUT
            )
            if lease.spec is not None and lease.spec.holder_identity == self.identity:
                lease.spec.holder_identity = None
                coordination.replace_namespaced_lease(
                    self.name, self.namespace, lease, _request_timeout=TIMEOUT
                )
        except Exception as e:  # the next leader takes over when the Lease expires
            log.info("could not release the lease: %s", type(e).__name__)
