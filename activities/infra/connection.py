"""The app Secret's connection keys: where clients connect (the Service's name, and its
ClusterIP where DBI_CONNECT_HOSTADDR asks for it) and how (verified TLS), with the keys
CloudNativePG's app Secret has, so that apps and charts made for it read this one."""

from __future__ import annotations

from urllib.parse import quote, urlencode

from activities.infra import postgres
from activities.infra.context import Context
from activities.infra.kube import Instance, Manifest
from dbi import names

SSLMODE = "verify-full"


def uri(user: str, password: str, host: str, database: str) -> str:
    """Return the connection URI users paste into a client (it holds the password); it
    asks for a verified TLS connection (the CA: the Secret's ``ca.crt``)."""
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
    path = f"{host}:{postgres.PORT}/{quote(database, safe='')}"
    return f"postgresql://{credentials}@{path}?{urlencode({'sslmode': SSLMODE})}"


def _pgpass_field(value: str) -> str:
    """A .pgpass field: ``\\`` and ``:`` escaped with a backslash (libpq's rule)."""
    return value.replace("\\", "\\\\").replace(":", "\\:")


def keys(
    user: str,
    password: str,
    database: str,
    host: str,
    hostaddr: str | None = None,
    *,
    ca_pem: str,
) -> dict[str, str]:
    """The connection keys of the credentials Secret besides ``username``, ``database``
    and ``password``: those CloudNativePG's app Secret has, so that apps, tools and
    Helm charts made for it read this one as is, and ``ca.crt`` and ``sslmode``. Several
    hold the password. With ``hostaddr`` (DBI_CONNECT_HOSTADDR), ``uri`` tells libpq to
    connect there while ``host`` stays the name the certificate is checked against."""
    port = str(postgres.PORT)
    jdbc_query = urlencode({"user": user, "password": password, "sslmode": SSLMODE})
    pgpass = ":".join(_pgpass_field(v) for v in (host, port, database, user, password))
    keys = {
        "host": host,
        "port": port,
        "user": user,
        "dbname": database,
        "uri": uri(user, password, host, database),
        "jdbc-uri": f"jdbc:postgresql://{host}:{port}/{quote(database, safe='')}?{jdbc_query}",
        "pgpass": pgpass + "\n",
        "sslmode": SSLMODE,
        "ca.crt": ca_pem,
    }
    if hostaddr:
        keys["uri"] += f"&{urlencode({'hostaddr': hostaddr})}"
        keys["hostaddr"] = hostaddr
    return keys


def ro_keys(
    user: str, password: str, database: str, ro: tuple[str, str | None] | None
) -> dict[str, str]:
    """With spec.instances (``ro`` from ``ro_endpoint``), ``ro-uri``: ``uri`` to the
    replicas' Service; nothing without."""
    if ro is None:
        return {}
    found = uri(user, password, ro[0], database)
    return {"ro-uri": found + (f"&{urlencode({'hostaddr': ro[1]})}" if ro[1] else "")}


def endpoint(ctx: Context, instance: Instance) -> tuple[str, str | None]:
    """The Secret's ``host`` (the Service's DNS name) and, where configured
    (DBI_CONNECT_HOSTADDR), the Service's ClusterIP for ``hostaddr``."""
    found = (
        ctx.kube.service(instance.namespace, instance.name) if ctx.config.connect_hostaddr else None
    )
    return published(ctx, instance, found)


def published(
    ctx: Context, instance: Instance, svc: Manifest | None, suffix: str = ""
) -> tuple[str, str | None]:
    """``endpoint``, from the Service ``<name><suffix>`` as read (``svc``)."""
    host = names.service_host(instance.namespace, instance.name + suffix)
    if not ctx.config.connect_hostaddr:
        return host, None
    return host, ((svc or {}).get("spec") or {}).get("clusterIP")


def ro_endpoint(ctx: Context, instance: Instance) -> tuple[str, str | None] | None:
    """With spec.instances, the Secret's ``ro-uri`` host and hostaddr: the Service
    ``<name>-ro`` (the replicas); None without."""
    if instance.model.spec.instances is None:
        return None
    name = instance.name + names.RO_SUFFIX
    found = ctx.kube.service(instance.namespace, name) if ctx.config.connect_hostaddr else None
    return published(ctx, instance, found, names.RO_SUFFIX)
