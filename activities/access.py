"""access (AccessReady): the app role and database, a password that works, a full Secret.

As the admin: the app role and its database exist (created if not); the app password
from the Secret authenticates (observed by logging in as the app user; if not,
``ALTER ROLE ... PASSWORD`` from the Secret); the app Secret has host, port and uri.
One change per pass, then Pending: the next pass observes it. A stopped instance is
skipped (Satisfied, reason Stopped).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import quote

import psycopg
from kubernetes import client as k8s
from psycopg import sql
from temporalio import activity

from activities import admin_credential, postgres, secrets
from activities.context import AT_ONCE, Context, Step, result
from activities.kube import KUBEVIRT, Instance
from dbi import scram
from dbi.models import PowerState
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "access", "AccessReady"


class Reason(StrEnum):
    READY = "AccessReady"
    STOPPED = "Stopped"
    ROLE_CREATED = "RoleCreated"
    DATABASE_CREATED = "DatabaseCreated"
    LOGIN_FIXED = "PasswordSet"
    CONNECTION_INFO_WRITTEN = "SecretCompleted"
    UNREACHABLE = "Unreachable"
    NO_CREDENTIALS = "NoCredentials"


class Action(StrEnum):
    NONE = "none"
    CREATE_ROLE = "create-role"
    CREATE_DATABASE = "create-database"
    ALTER_LOGIN = "alter-login"
    WRITE_CONNECTION_INFO = "write-connection-info"


@dataclass(frozen=True)
class Observation:
    stopped: bool
    reachable: bool
    has_app_password: bool
    role_exists: bool
    database_exists: bool
    app_login_works: bool
    secret_complete: bool


_STEPS = [
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
        "The Secret got host, port and uri.",
    ),
]


def decide(obs: Observation) -> tuple[StepResult, Action]:
    """Return the outcome and the one change to make (pure)."""
    if obs.stopped:
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.STOPPED,
            "The instance is stopped, as asked; not checked.",
        ), Action.NONE
    if not obs.has_app_password:
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.NO_CREDENTIALS,
            "The credentials Secret has no password yet.",
            requeue_after=1,
        ), Action.NONE
    if not obs.reachable:
        return result(
            STEP,
            CONDITION,
            Outcome.PENDING,
            Reason.UNREACHABLE,
            "PostgreSQL does not answer the admin.",
            requeue_after=2,
        ), Action.NONE
    for field, action, reason, message in _STEPS:
        if not getattr(obs, field):
            return result(
                STEP, CONDITION, Outcome.PENDING, reason, message, requeue_after=AT_ONCE
            ), action
    return result(
        STEP,
        CONDITION,
        Outcome.SATISFIED,
        Reason.READY,
        "The app role, its database and the credentials Secret are ready.",
    ), Action.NONE


def uri(user: str, password: str, host: str, database: str) -> str:
    """Return the connection URI users paste into a client (it holds the password)."""
    credentials = f"{quote(user, safe='')}:{quote(password, safe='')}"
    return f"postgresql://{credentials}@{host}:{postgres.PORT}/{quote(database, safe='')}"


class Access(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        if instance.model.spec.power_state is PowerState.STOPPED:
            return decide(Observation(True, False, False, False, False, False, False))[0]
        kube = self.ctx.kube
        vmi = kube.get_custom(
            *KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name
        )
        interfaces = (vmi or {}).get("status", {}).get("interfaces", [])
        host = interfaces[0].get("ipAddress") if interfaces else None
        admin = admin_credential.read(kube, self.ctx.config.namespace, instance.uid)
        app = secrets.read(kube, instance.namespace, secrets.app_name(instance))
        obs = observe(instance, host, admin.password, app)
        decision, action = decide(obs)
        if action is not Action.NONE and host is not None:
            act(self.ctx, instance, action, host=host, admin_password=admin.password, app=app)
        return decision


def observe(
    instance: Instance, host: str | None, admin_password: str, app: secrets.Read
) -> Observation:
    creds = instance.model.spec.credentials
    wanted = {"host": host, "port": str(postgres.PORT)}
    if host and app.password:
        wanted["uri"] = uri(creds.username, app.password, host, creds.database)
    complete = all(app.data.get(k) == v for k, v in wanted.items())
    if host is None or not app.password:
        return Observation(False, False, bool(app.password), False, False, False, complete)
    try:
        with postgres.connect(host, password=admin_password) as conn:
            role = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (creds.username,)
            ).fetchone()
            db = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (creds.database,)
            ).fetchone()
    except psycopg.OperationalError:
        return Observation(False, False, True, False, False, False, complete)
    works = (
        role is not None
        and db is not None
        and postgres.authenticates(
            host, user=creds.username, password=app.password, dbname=creds.database
        )
    )
    return Observation(False, True, True, role is not None, db is not None, works, complete)


def act(
    ctx: Context,
    instance: Instance,
    action: Action,
    *,
    host: str,
    admin_password: str,
    app: secrets.Read,
) -> None:
    creds = instance.model.spec.credentials
    role, database = sql.Identifier(creds.username), sql.Identifier(creds.database)
    if action is Action.WRITE_CONNECTION_INFO:
        data = {
            **app.data,
            "host": host,
            "port": str(postgres.PORT),
            "uri": uri(creds.username, app.password, host, creds.database),
        }
        try:
            secrets.apply(
                ctx.kube,
                instance,
                secrets.app_name(instance),
                data,
                uid=app.uid,
                annotations=secrets.ours(app),
            )
        except k8s.ApiException as e:
            if not secrets.conflict(e):
                raise  # deleted meanwhile: the credentials step makes a new one next pass
        return
    # The password reaches PostgreSQL as its SCRAM verifier only (dbi.scram).
    verifier = sql.Literal(scram.verifier(app.password))
    statements = {
        Action.CREATE_ROLE: sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, verifier),
        Action.CREATE_DATABASE: sql.SQL("CREATE DATABASE {} OWNER {}").format(database, role),
        Action.ALTER_LOGIN: sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(role, verifier),
    }
    with postgres.connect(host, password=admin_password) as conn:
        conn.execute(statements[action])
