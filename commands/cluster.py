"""The cluster a command talks to, chosen as kubectl chooses it (``--kubeconfig``, else
``KUBECONFIG``, else ``~/.kube/config``, else the pod's ServiceAccount; ``--context``;
the namespace from ``-n``, else the context's), and the DBInstances it reads there."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from dbi import connect, environment, names


@dataclass(frozen=True)
class Kube:
    """The cluster a command talks to, chosen as kubectl chooses it."""

    kubeconfig: str | None = None  # --kubeconfig
    context: str | None = None  # --context
    # Temporal (commands/target.py): --temporal-address, --temporal-namespace, and
    # --dbi-namespace, where the install records its settings.
    temporal_address: str | None = None
    temporal_namespace: str | None = None
    home: str = "dbi-system"

    @classmethod
    def from_args(cls, args: Any) -> Kube:
        """The cluster and Temporal flags of a parsed command line (kubectl's, and
        ``--temporal-address``, ``--temporal-namespace``, ``--dbi-namespace``)."""
        return cls(
            args.kubeconfig,
            args.context,
            temporal_address=args.temporal_address,
            temporal_namespace=args.temporal_namespace,
            home=args.dbi_namespace or cls.home,
        )

    def config_file(self) -> str | None:
        """``--kubeconfig``, else ``KUBECONFIG``, else ``~/.kube/config`` if it exists;
        None: the pod's ServiceAccount."""
        default = Path.home() / ".kube" / "config"
        return (
            self.kubeconfig
            or environment.KUBECONFIG.get()
            or (str(default) if default.exists() else None)
        )

    def api(self) -> k8s.ApiClient:
        return connect.kubernetes(self.config_file(), context=self.context)

    def objects(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api())

    def namespace(self) -> str:
        """The namespace of the chosen context, as kubectl takes it; ``default`` without
        one (and in a pod, the pod's own namespace, as kubectl there)."""
        path = self.config_file()
        if path is None:
            mounted = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
            return mounted.read_text().strip() if mounted.exists() else "default"
        contexts, active = k8s_config.list_kube_config_contexts(config_file=path)
        chosen = active
        if self.context is not None:
            chosen = next((c for c in contexts if c["name"] == self.context), None)
            if chosen is None:
                raise k8s_config.ConfigException(f"it has no context {self.context!r}")
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def instance_argument(
    parser: argparse.ArgumentParser, help: str, *, optional: bool = False
) -> None:
    """The NAME of a DBInstance, which the shell completes from the cluster."""
    action: Any = parser.add_argument("name", nargs="?" if optional else None, help=help)
    action.completer = _instance_names


def _instance_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The DBInstances of the namespace the line names so far (argcomplete's completer);
    none when the cluster does not answer within 3 s: a completion never fails."""
    kube = Kube(getattr(parsed_args, "kubeconfig", None), getattr(parsed_args, "context", None))
    try:
        namespace = getattr(parsed_args, "namespace", None) or kube.namespace()
        listed = kube.objects().list_namespaced_custom_object(
            names.GROUP, names.VERSION, namespace, names.PLURAL, _request_timeout=3
        )
    except (k8s.ApiException, urllib3.exceptions.HTTPError, OSError, k8s_config.ConfigException):
        return []
    found = (item["metadata"]["name"] for item in cast(dict[str, Any], listed)["items"])
    return sorted(name for name in found if name.startswith(prefix))


def read_instance(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return cast(
            dict[str, Any],
            kube.objects().get_namespaced_custom_object(
                names.GROUP, names.VERSION, namespace, names.PLURAL, name
            ),
        )
    except k8s.ApiException as e:
        if e.status == 404:
            return None
        raise


def unconfigured(kube: Kube, error: Exception) -> str:
    """What a command says when it cannot tell which cluster to talk to."""
    path = kube.config_file()
    if path is None:
        return (
            "dbi: no kubeconfig (--kubeconfig, KUBECONFIG or ~/.kube/config), and not in a "
            f"pod ({error})"
        )
    if not Path(path).exists():
        return f"dbi: kubeconfig {path} does not exist"
    return f"dbi: kubeconfig {path}: {error}"


def failure(kube: Kube, error: BaseException) -> str:
    """What a command says when the cluster did not serve it: the API server's address
    and the cause in a sentence, never a response's headers or body dump."""
    where = kube.config_file() or "the pod's ServiceAccount"
    if isinstance(error, k8s.ApiException):
        if error.status == 404 and "page not found" in str(error.body or ""):
            return (
                f"dbi: the cluster of {where} serves no {names.PLURAL}.{names.GROUP}: is the "
                "CRD installed? (kubectl apply --server-side -f crds/)"
            )
        if error.status in (401, 403):
            return (
                f"dbi: the cluster of {where} refused ({error.status} {error.reason}): "
                f"{status_message(error)}"
            )
        return f"dbi: the cluster of {where} answered {error.status} {error.reason}"
    cause = getattr(error, "reason", None) or error
    return f"dbi: the cluster of {where} did not answer ({type(cause).__name__}: {cause})"


def status_message(error: k8s.ApiException) -> str:
    """The message of the Kubernetes Status an API error carries, if it carries one."""
    try:
        status = json.loads(error.body or "")
    except (TypeError, ValueError):
        return "no reason given"
    return str(status.get("message") or "no reason given") if isinstance(status, dict) else ""


def parameters_line(observed: dict[str, Any]) -> list[str]:
    """The line naming the spec.postgresql.parameters written, and what waits for a
    restart; none when nothing is."""
    written, pending = observed.get("parameters") or [], observed.get("pendingRestart") or []
    if not written and not pending:
        return []
    waiting = f" (at the next restart: {', '.join(pending)})" if pending else ""
    return [f"  parameters   {', '.join(written) or '-'}{waiting}"]
