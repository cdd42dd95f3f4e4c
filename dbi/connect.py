"""Connections every dbi process makes: to Kubernetes and to Temporal, configured once.

``kubernetes`` returns the official client's ApiClient (synchronous), ``temporal`` a
Temporal client with dbi's data converter (``dbi.payloads``) and the OpenTelemetry
interceptor; the worker, the watcher and the command line all connect through here.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from temporalio.client import Client, Interceptor
from temporalio.envconfig import ClientConfig, ClientConnectConfig
from temporalio.runtime import Runtime
from temporalio.service import TLSConfig

from dbi import environment, names
from dbi.payloads import DATA_CONVERTER

VERSION = importlib.metadata.version("dbi")


# A request that gets no answer fails after this long (connect, read) instead of holding
# its thread for ever; the worker's calls are all short (no watches).
REQUEST_TIMEOUT_SECONDS = (5.0, 30.0)


class _TimedApiClient(k8s.ApiClient):
    """An ApiClient whose requests without a timeout of their own get ``timeout``."""

    def __init__(self, configuration: k8s.Configuration, timeout: tuple[float, float]) -> None:
        super().__init__(configuration)
        self._timeout = timeout

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("_request_timeout") is None:
            kwargs["_request_timeout"] = self._timeout
        return super().call_api(*args, **kwargs)


def kubernetes(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    connections: int = 10,
    request_timeout: tuple[float, float] | None = None,
) -> k8s.ApiClient:
    """Return an API client from ``kubeconfig`` (its ``context``, else its current one),
    $KUBECONFIG, or the pod's service account,
    keeping up to ``connections`` connections open (give one per thread that uses it).
    With ``request_timeout`` (connect, read seconds), every request without a timeout of
    its own gets it: for a client that makes no watches (a watch waits for events)."""
    configuration = k8s.Configuration()
    path = kubeconfig or environment.KUBECONFIG.get()
    if path:
        k8s_config.load_kube_config(
            config_file=path, context=context, client_configuration=configuration
        )
    else:
        k8s_config.load_incluster_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = connections
    api = (
        _TimedApiClient(configuration, request_timeout)
        if request_timeout
        else k8s.ApiClient(configuration)
    )
    # The API server names the field manager of a write without one after the user
    # agent's product, so every write through this client is the orchestrator's in
    # managedFields (the watcher skips events of its own writes: watcher/relevance.py).
    api.user_agent = f"{names.FIELD_MANAGER}/{VERSION}"
    return api


def temporal_settings(
    address: str | None = None, namespace: str | None = None
) -> ClientConnectConfig:
    """How to reach Temporal: the SDK's environment configuration (``envconfig``: the
    ``TEMPORAL_*`` variables, and the profile ``TEMPORAL_PROFILE`` names in the file
    ``TEMPORAL_CONFIG_FILE`` or the default one: address, namespace, TLS and mTLS, API
    key, gRPC metadata), with ``address`` and ``namespace`` over it when given, and
    dbi's defaults (127.0.0.1:7233, ``default``) under it."""
    settings = ClientConfig.load_client_connect_config(profile=environment.TEMPORAL_PROFILE.get())
    settings["target_host"] = (
        address or settings.get("target_host") or str(environment.TEMPORAL_ADDRESS.default)
    )
    settings["namespace"] = (
        namespace or settings.get("namespace") or str(environment.TEMPORAL_NAMESPACE.default)
    )
    return settings


async def temporal(
    address: str | None = None,
    *,
    namespace: str | None = None,
    runtime: Runtime | None = None,
    tls: bool | TLSConfig | None = None,
) -> Client:
    """Return a client with the data converter and interceptors every dbi process uses,
    connected as ``temporal_settings`` says (with TLS when ``tls``, True: the system's
    CAs, or a TLSConfig, and the configuration says nothing of it)."""
    settings = temporal_settings(address, namespace)
    if tls:  # under what the configuration says of TLS, if anything
        settings = ClientConnectConfig(**(dict(tls=tls) | settings))
    return await Client.connect(
        **settings,
        data_converter=DATA_CONVERTER,
        interceptors=_tracing(),
        runtime=runtime,
    )


def _tracing() -> list[Interceptor]:
    """OpenTelemetry's interceptor, which carries a command's or a process's trace into
    the workflows it calls; none where OpenTelemetry is not installed (the command line
    installed without the ``worker`` extra)."""
    try:
        from temporalio.contrib.opentelemetry import TracingInterceptor  # noqa: PLC0415
    except ImportError:
        return []
    return [TracingInterceptor()]
