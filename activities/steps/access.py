"""access (AccessReady): the Service, the app role and database, a password that works,
a full Secret.

The Service ``<name>`` (port 5432, selecting the VM's pods by the instance label) is
the instance's stable endpoint: the Secret's ``host`` and ``status.endpoint`` name it
(``<name>.<namespace>.svc``), so a VM restart, which changes the VM's address, changes
nothing for clients. A Service of that name that is not the instance's stops the step
(``activities.infra.ownership``).

As the admin: the app role and its database exist (created if not); the app password
from the Secret authenticates (observed by logging in as the app user; if not,
``ALTER ROLE ... PASSWORD`` from the Secret); the app Secret has the connection keys
(``activities.infra.connection``: CloudNativePG's, with ``sslmode=verify-full`` in ``uri`` and
``jdbc-uri`` and the namespace's CA as ``ca.crt``).
One change per look, then Pending: the loop observes it at once. A stopped instance
is skipped (Satisfied, reason Stopped). Idempotency key: the role and database names
(created only when absent) and the Secret's password (the one ALTER ROLE sets, as its
SCRAM verifier); a retry sets the same again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

import psycopg
from kubernetes import client as k8s
from psycopg import sql

from activities.infra import (
    addresses,
    admin_credential,
    connection,
    manifests,
    members,
    ownership,
    postgres,
    secrets,
    trust,
)
from activities.infra.context import Context
from activities.infra.kube import Instance, Manifest
from activities.steps.loop import Anatomy
from dbi import scram
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
    address: str | None = None  # where the VM's PostgreSQL listens
    # The app Secret's resourceVersion as read: the action acts on that one only.
    app_version: str | None = None
    children: tuple[ownership.Child, ...] = ()
    # The Secret's host and hostaddr, from the Service as read (``connection.endpoint``).
    published: tuple[str, str | None] = ("", None)
    ro: tuple[str, str | None] | None = None  # spec.instances: ro-uri's (connection.ro_endpoint)
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


def service(instance: Instance) -> Manifest:
    """The Service ``<name>``: PostgreSQL's port on the VM's pods (the instance label;
    with spec.instances, the primary's: ``activities.infra.members``)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": instance.child_metadata(instance.name),
        "spec": {
            "selector": members.primary_selector(instance),
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


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if instance.model.spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    kube = ctx.kube
    host = addresses.address_of(addresses.vmi_of(kube, instance))
    admin_password = admin_credential.read(kube, ctx.config.namespace, instance.uid).password
    app = secrets.read(kube, instance.namespace, secrets.app_name(instance))
    svc = ctx.kube.service(instance.namespace, instance.name)
    published = connection.published(ctx, instance, svc)
    ca = trust.recent_ca(kube, ctx.config.namespace, instance.namespace)
    ca_pem = ca.cert_pem if ca is not None else ""
    server = None if host is None else trust.reach(instance, host, ca)
    ro = connection.ro_endpoint(ctx, instance)
    looked = _look(instance, server, admin_password, app, (published, ro), ca_pem)
    return replace(
        looked,
        published=published,
        ro=ro,
        ca_pem=ca_pem,
        service_ok=svc is not None and manifests.covers(service(instance)["spec"], svc.get("spec")),
        address=host,
        app_version=app.resource_version,
        children=(ownership.Child("Service", instance.name, ownership.meta_of(svc, ctx.kube)),),
    )


def _look(
    instance: Instance,
    server: postgres.Server | None,
    admin_password: str,
    app: secrets.Read,
    endpoints: tuple[tuple[str, str | None], tuple[str, str | None] | None],
    ca_pem: str,
) -> Observation:
    """``server`` is how dbi reaches the VM; ``endpoints`` the Secret's host and
    hostaddr, and ro-uri's."""
    creds = instance.model.spec.credentials
    published, ro = endpoints
    wanted: dict[str, str | None] = {"host": published[0], "port": str(postgres.PORT)}
    if app.password:
        wanted = {
            **connection.keys(
                creds.username, app.password, creds.database, *published, ca_pem=ca_pem
            ),
            **connection.ro_keys(creds.username, app.password, creds.database, ro),
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
    ro: tuple[str, str | None] | None = None,
) -> bool:
    """Add the connection keys to the app Secret ``app`` as read; False when it was deleted
    or written after that read (a user setting their own password): nothing is written,
    and the next look reads it again."""
    creds = instance.model.spec.credentials
    keys = {
        **connection.keys(creds.username, app.password, creds.database, *published, ca_pem=ca_pem),
        **connection.ro_keys(creds.username, app.password, creds.database, ro),
    }
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
    """Apply the Service, or act with the app Secret as observed: one written since (a
    user setting their own password) is left alone, and the next look observes it."""
    if action is Action.APPLY_SERVICE:
        ctx.kube.apply_service(service(instance))
        return
    app = secrets.read(ctx.kube, instance.namespace, secrets.app_name(instance))
    if app.resource_version != obs.app_version:
        return
    if action is Action.WRITE_CONNECTION_INFO:
        complete_secret(ctx, instance, app, obs.published, ca_pem=obs.ca_pem, ro=obs.ro)
        return
    creds = instance.model.spec.credentials
    role, database = sql.Identifier(creds.username), sql.Identifier(creds.database)
    # The password reaches PostgreSQL as its SCRAM verifier only (dbi.scram).
    verifier = sql.Literal(scram.verifier(app.password))
    statements = {
        Action.CREATE_ROLE: sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, verifier),
        Action.CREATE_DATABASE: sql.SQL("CREATE DATABASE {} OWNER {}").format(database, role),
        Action.ALTER_LOGIN: sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(role, verifier),
    }
    assert obs.address is not None
    home = ctx.config.namespace
    admin_password = admin_credential.read(ctx.kube, home, instance.uid).password
    with postgres.connect(
        trust.server(ctx.kube, home, instance, obs.address), password=admin_password
    ) as conn:
        conn.execute(statements[action])


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
