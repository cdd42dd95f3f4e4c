"""access (AccessReady): the Service, the app role and database, a password that works,
a full Secret.

The Service ``<name>`` (port 5432, selecting the VM's pods by the instance label) is
the instance's stable endpoint: the Secret's ``host`` and ``status.endpoint`` name it
(``<name>.<namespace>.svc``), so a VM restart, which changes the VM's address, changes
nothing for clients. A Service of that name that is not the instance's stops the step
(``activities.ownership``).

As the admin: the app role and its database exist (created if not); the app password
from the Secret authenticates (observed by logging in as the app user; if not,
``ALTER ROLE ... PASSWORD`` from the Secret); the app Secret has the connection keys
(``connection``: CloudNativePG's, with ``sslmode=verify-full`` in ``uri`` and
``jdbc-uri`` and the namespace's CA as ``ca.crt``).
One change per look, then Pending: the loop observes it at once. A stopped instance
is skipped (Satisfied, reason Stopped). Idempotency key: the role and database names
(created only when absent) and the Secret's password (the one ALTER ROLE sets, as its
SCRAM verifier); a retry sets the same again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from urllib.parse import quote, urlencode

import psycopg
from kubernetes import client as k8s
from psycopg import sql

from activities import addresses, admin_credential, manifests, ownership, postgres, secrets, trust
from activities.kube import Instance, Manifest
from activities.step import Anatomy, Context
from dbi import names, scram
from dbi.pipeline import ACCESS as SPEC
from dbi.spec import PowerState
from dbi.steps import AT_ONCE, Common, Decision, StepInput


class Reason(StrEnum):
    READY = SPEC.condition_type
    STOPPED = Common.STOPPED
    SERVICE_APPLIED = "ServiceApplied"
    ROLE_CREATED = "RoleCreated"
    DATABASE_CREATED = "DatabaseCreated"
    LOGIN_FIXED = "PasswordSet"
    CONNECTION_INFO_WRITTEN = "SecretCompleted"
    UNREACHABLE = "Unreachable"
    NO_CREDENTIALS = "NoCredentials"


class Action(StrEnum):
    APPLY_SERVICE = "apply-service"
    CREATE_ROLE = "create-role"
    CREATE_DATABASE = "create-database"
    ALTER_LOGIN = "alter-login"
    WRITE_CONNECTION_INFO = "write-connection-info"


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool = False
    reachable: bool = False
    has_app_password: bool = False
    role_exists: bool = False
    database_exists: bool = False
    app_login_works: bool = False
    secret_complete: bool = False
    service_ok: bool = True
    # What the action needs (None in pure tests): how dbi reaches the VM, the admin
    # password, the app Secret as read. Passwords never leave the activity.
    server: postgres.Server | None = None
    admin_password: str = field(default="", repr=False)
    app: secrets.Read | None = field(default=None, repr=False)
    children: tuple[ownership.Child, ...] = ()
    # The Secret's host and hostaddr, from the Service as read (``endpoint``).
    published: tuple[str, str | None] = ("", None)
    ca_pem: str = ""  # the namespace's CA, the Secret's ca.crt


_STEPS = [
    (
        "service_ok",
        Action.APPLY_SERVICE,
        Reason.SERVICE_APPLIED,
        "The instance's Service was applied.",
    ),
    ("role_exists", Action.CREATE_ROLE, Reason.ROLE_CREATED, "The app role was created."),
    (
        "database_exists",
        Action.CREATE_DATABASE,
        Reason.DATABASE_CREATED,
        "The app database was created.",
    ),
    (
        "app_login_works",
        Action.ALTER_LOGIN,
        Reason.LOGIN_FIXED,
        "The app password was set from the Secret.",
    ),
    (
        "secret_complete",
        Action.WRITE_CONNECTION_INFO,
        Reason.CONNECTION_INFO_WRITTEN,
        "The Secret got its connection keys (host, port, uri, jdbc-uri, pgpass, ca.crt).",
    ),
]


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one change to make (pure)."""
    if obs.stopped:
        message = "The instance is stopped, as asked; not checked."
        return SPEC.satisfied(Reason.STOPPED, message)
    if not obs.has_app_password:
        message = "The credentials Secret has no password yet."
        return SPEC.pending(Reason.NO_CREDENTIALS, message, after=1)
    if not obs.reachable:
        message = "PostgreSQL does not answer the admin."
        return SPEC.pending(Reason.UNREACHABLE, message, after=2)
    for fact, action, reason, message in _STEPS:
        if not getattr(obs, fact):
            return SPEC.pending(reason, message, action, after=AT_ONCE)
    message = "The app role, its database and the credentials Secret are ready."
    return SPEC.satisfied(Reason.READY, message)


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


def connection(
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


def service(instance: Instance) -> Manifest:
    """The Service ``<name>``: PostgreSQL's port on the VM's pods (the instance label)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": instance.child_metadata(instance.name),
        "spec": {
            "selector": {names.INSTANCE_LABEL: instance.name},
            "ports": [
                {
                    "name": "postgresql",
                    "port": postgres.PORT,
                    "targetPort": postgres.PORT,
                    "protocol": "TCP",
                }
            ],
        },
    }


def endpoint(ctx: Context, instance: Instance) -> tuple[str, str | None]:
    """The Secret's ``host`` (the Service's DNS name) and, where configured
    (DBI_CONNECT_HOSTADDR), the Service's ClusterIP for ``hostaddr``."""
    found = (
        ctx.kube.service(instance.namespace, instance.name) if ctx.config.connect_hostaddr else None
    )
    return _published(ctx, instance, found)


def _published(ctx: Context, instance: Instance, svc: Manifest | None) -> tuple[str, str | None]:
    """``endpoint``, from the Service as read."""
    host = names.service_host(instance.namespace, instance.name)
    if not ctx.config.connect_hostaddr:
        return host, None
    return host, ((svc or {}).get("spec") or {}).get("clusterIP")


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if instance.model.spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    kube = ctx.kube
    host = addresses.address_of(addresses.vmi_of(kube, instance))
    admin_password = admin_credential.read(kube, ctx.config.namespace, instance.uid).password
    app = secrets.read(kube, instance.namespace, secrets.app_name(instance))
    svc = ctx.kube.service(instance.namespace, instance.name)
    published = _published(ctx, instance, svc)
    ca = trust.recent_ca(kube, ctx.config.namespace, instance.namespace)
    ca_pem = ca.cert_pem if ca is not None else ""
    server = None if host is None else trust.reach(instance, host, ca)
    looked = _look(instance, server, admin_password, app, published, ca_pem)
    return replace(
        looked,
        published=published,
        ca_pem=ca_pem,
        service_ok=svc is not None and manifests.covers(service(instance)["spec"], svc.get("spec")),
        server=server,
        admin_password=admin_password,
        app=app,
        children=(ownership.Child("Service", instance.name, ownership.meta_of(svc, ctx.kube)),),
    )


def _look(
    instance: Instance,
    server: postgres.Server | None,
    admin_password: str,
    app: secrets.Read,
    published: tuple[str, str | None],
    ca_pem: str,
) -> Observation:
    """``server`` is how dbi reaches the VM; ``published`` the Secret's host and
    hostaddr."""
    creds = instance.model.spec.credentials
    wanted: dict[str, str | None] = {"host": published[0], "port": str(postgres.PORT)}
    if app.password:
        wanted = {
            **connection(creds.username, app.password, creds.database, *published, ca_pem=ca_pem)
        }
    complete = all(app.data.get(k) == v for k, v in wanted.items())
    if server is None or not app.password:
        return Observation(has_app_password=bool(app.password), secret_complete=complete)
    try:
        with postgres.connect(server, password=admin_password) as conn:
            role = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (creds.username,)
            ).fetchone()
            db = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (creds.database,)
            ).fetchone()
    except psycopg.OperationalError:
        return Observation(has_app_password=True, secret_complete=complete)
    works = (
        role is not None
        and db is not None
        and postgres.authenticates(
            server, user=creds.username, password=app.password, dbname=creds.database
        )
    )
    return Observation(
        reachable=True,
        has_app_password=True,
        role_exists=role is not None,
        database_exists=db is not None,
        app_login_works=works,
        secret_complete=complete,
    )


def complete_secret(
    ctx: Context,
    instance: Instance,
    app: secrets.Read,
    published: tuple[str, str | None],
    *,
    ca_pem: str,
) -> bool:
    """Add the connection keys to the app Secret ``app`` as read; False when it was deleted
    or written after that read (a user setting their own password): nothing is written,
    and the next look reads it again."""
    creds = instance.model.spec.credentials
    keys = connection(creds.username, app.password, creds.database, *published, ca_pem=ca_pem)
    try:
        secrets.apply(
            ctx.kube,
            instance,
            secrets.app_name(instance),
            {**app.data, **keys},
            read=app,
            annotations=secrets.ours(app),
        )
    except k8s.ApiException as e:
        if not secrets.conflict(e):
            raise
        return False
    return True


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    server, admin_password, app = obs.server, obs.admin_password, obs.app
    assert server is not None and app is not None
    creds = instance.model.spec.credentials
    role, database = sql.Identifier(creds.username), sql.Identifier(creds.database)
    if action is Action.APPLY_SERVICE:
        svc = service(instance)
        ctx.kube.core.patch_namespaced_service(
            instance.name,
            instance.namespace,
            svc,
            field_manager=names.FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )
        return
    if action is Action.WRITE_CONNECTION_INFO:
        complete_secret(ctx, instance, app, obs.published, ca_pem=obs.ca_pem)
        return
    # The password reaches PostgreSQL as its SCRAM verifier only (dbi.scram).
    verifier = sql.Literal(scram.verifier(app.password))
    statements = {
        Action.CREATE_ROLE: sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, verifier),
        Action.CREATE_DATABASE: sql.SQL("CREATE DATABASE {} OWNER {}").format(database, role),
        Action.ALTER_LOGIN: sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(role, verifier),
    }
    with postgres.connect(server, password=admin_password) as conn:
        conn.execute(statements[action])


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
