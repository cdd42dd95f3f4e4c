"""Which Temporal a command talks to, and why: ``--temporal-address`` (and
``--temporal-namespace``), else the SDK's environment configuration (``TEMPORAL_*``
variables, a ``TEMPORAL_PROFILE``), else what the cluster's install records (the
ConfigMap labeled ``dbi.dev/temporal-settings`` in dbi's namespace, which the chart and
deploy/ write), else 127.0.0.1:7233. ``describe`` prints it, so that a ``--context``
that switched the cluster does not silently keep another environment's Temporal."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import urllib3
from kubernetes import client as k8s
from temporalio.client import Client
from temporalio.envconfig import ClientConfig
from temporalio.service import TLSConfig

from commands.cluster import Kube
from dbi import connect, environment

# The label on the ConfigMap that holds an install's Temporal settings.
RECORD_LABEL = "dbi.dev/temporal-settings"


@dataclass(frozen=True)
class Target:
    address: str
    namespace: str
    source: str  # where the address came from, as describe prints it
    tls: bool | None = None  # the cluster's record says TLS; None: as configured
    server_name: str | None = None  # the name the server's certificate has, if recorded

    def __str__(self) -> str:
        return f"{self.address} namespace {self.namespace} (from {self.source})"

    async def connect(self) -> Client:
        tls: bool | TLSConfig | None = self.tls
        if self.tls and self.server_name:
            tls = TLSConfig(domain=self.server_name)
        return await connect.temporal(self.address, namespace=self.namespace, tls=tls)


@functools.cache
def resolve(kube: Kube) -> Target:
    """The command's Temporal (once per command: the record is read at most once)."""
    configured = ClientConfig.load_client_connect_config(profile=environment.TEMPORAL_PROFILE.get())
    default_namespace = str(environment.TEMPORAL_NAMESPACE.default)
    if kube.temporal_address:
        namespace = kube.temporal_namespace or configured.get("namespace") or default_namespace
        return Target(kube.temporal_address, namespace, "--temporal-address")
    if address := configured.get("target_host"):
        namespace = kube.temporal_namespace or configured.get("namespace") or default_namespace
        return Target(address, namespace, "TEMPORAL_ADDRESS or the Temporal profile")
    recorded, why = _recorded(kube, kube.home)
    if recorded is not None:
        name, data = recorded
        namespace = kube.temporal_namespace or data.get("TEMPORAL_NAMESPACE") or default_namespace
        source = f"ConfigMap {kube.home}/{name}"
        tls = data.get("TEMPORAL_TLS", "").lower() == "true" or None
        server_name = data.get("TEMPORAL_TLS_SERVER_NAME") or None
        return Target(data["TEMPORAL_ADDRESS"], namespace, source, tls, server_name)
    address = str(environment.TEMPORAL_ADDRESS.default)
    return Target(address, kube.temporal_namespace or default_namespace, f"the default; {why}")


def _recorded(kube: Kube, home: str) -> tuple[tuple[str, dict[str, str]] | None, str]:
    """The install's newest record of its Temporal settings (its name and data), or None
    and why not."""
    try:
        found = k8s.CoreV1Api(kube.objects().api_client).list_namespaced_config_map(
            home, label_selector=RECORD_LABEL
        )
    except k8s.ApiException as e:
        return None, f"no record readable in {home} ({e.status} {e.reason})"
    except (urllib3.exceptions.HTTPError, OSError) as e:  # the command says so next
        return None, f"no record readable in {home} ({type(e).__name__})"
    records = sorted(
        (str(c.metadata.creation_timestamp), c.metadata.name, c.data)
        for c in found.items
        if c.metadata and c.data and c.data.get("TEMPORAL_ADDRESS")
    )
    if not records:
        return None, f"no record in {home}"
    _, name, data = records[-1]
    return (str(name), dict(data)), ""
