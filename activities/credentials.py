"""credentials (CredentialsReady): the admin, app and cloud-init Secrets.

Observes the three Secrets; one that is not the instance's stops the step
(``activities.ownership``: Terminal for a foreign one, adopted when the instance says
so). Makes what is missing in one go (a password only where there is none), and is
Pending after writing, Satisfied when all three are complete and the two that
``deletionPolicy: Retain`` keeps (admin, cloud-init) carry an owner reference exactly
under Delete.
A Secret deleted between the read and the apply (409 on the UID precondition) gets a
fresh password there and then: that is the rotation by deletion. Passwords never leave
this activity.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from kubernetes import client as k8s
from pydantic import SecretStr
from temporalio import activity

from activities import ownership, secrets
from activities.context import AT_ONCE, Context, Step, result
from activities.kube import Instance
from dbi import bootstrap
from dbi.config import ADMIN_USER
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "credentials", "CredentialsReady"


class Reason(StrEnum):
    READY = "SecretsReady"
    CREATED = "SecretsWritten"
    OWNERS_SYNCED = "OwnerReferencesSynced"


@dataclass(frozen=True)
class Observation:
    admin_complete: bool
    app_complete: bool
    cloudinit_matches: bool
    # The admin and cloud-init Secrets are kept under deletionPolicy Retain: their
    # owner references follow the policy.
    kept_follow_policy: bool = True


def decide(obs: Observation, *, secret_name: str) -> StepResult:
    """Return Satisfied when all three Secrets are complete, else Pending (after writing)."""
    if obs.admin_complete and obs.app_complete and obs.cloudinit_matches:
        if not obs.kept_follow_policy:
            return result(
                STEP,
                CONDITION,
                Outcome.PENDING,
                Reason.OWNERS_SYNCED,
                "The admin and cloud-init Secrets' owner references now follow deletionPolicy.",
                requeue_after=AT_ONCE,
            )
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.READY,
            "The admin, credentials and cloud-init Secrets are complete.",
            credentials_secret_name=secret_name,
        )
    return result(
        STEP,
        CONDITION,
        Outcome.PENDING,
        Reason.CREATED,
        "Missing Secrets or passwords were written.",
        requeue_after=AT_ONCE,
    )


def _app_data(instance: Instance, current: secrets.Read, password: str) -> dict[str, str]:
    creds = instance.model.spec.credentials
    # Keep what the access step added (host, port, uri): an apply owns exactly its keys.
    return {
        **current.data,
        "username": creds.username,
        "database": creds.database,
        "password": password,
    }


@dataclass(frozen=True)
class Reads:
    admin: secrets.Read
    app: secrets.Read
    cloudinit: secrets.Read

    def children(self, instance: Instance) -> list[ownership.Child]:
        names = (
            secrets.admin_name(instance),
            secrets.app_name(instance),
            secrets.cloudinit_name(instance),
        )
        reads = (self.admin, self.app, self.cloudinit)
        return [ownership.Child("Secret", n, r.meta) for n, r in zip(names, reads, strict=True)]


def read_all(ctx: Context, instance: Instance) -> Reads:
    kube, ns = ctx.kube, instance.namespace
    return Reads(
        admin=secrets.read(kube, ns, secrets.admin_name(instance)),
        app=secrets.read(kube, ns, secrets.app_name(instance)),
        cloudinit=secrets.read(kube, ns, secrets.cloudinit_name(instance)),
    )


def observe(instance: Instance, reads: Reads) -> Observation:
    admin, app, cloudinit = reads.admin, reads.app, reads.cloudinit
    creds = instance.model.spec.credentials
    children = reads.children(instance)
    return Observation(
        admin_complete=bool(admin.password),
        app_complete=bool(app.password)
        and (app.data.get("username"), app.data.get("database"))
        == (creds.username, creds.database),
        cloudinit_matches=bool(admin.password)
        and secrets.userdata_matches(cloudinit, admin.password),
        kept_follow_policy=all(
            ownership.follows_policy(c, instance) for c in (children[0], children[2])
        ),
    )


def ensure(ctx: Context, instance: Instance, reads: Reads, obs: Observation) -> None:
    """Write what is incomplete: a password only where there is none; the kept Secrets
    again (same data) when their owner references do not follow deletionPolicy."""
    kube, admin, app, cloudinit = ctx.kube, reads.admin, reads.app, reads.cloudinit
    admin_password = admin.password
    if not obs.admin_complete or not obs.kept_follow_policy:
        admin_password = _write(
            ctx,
            instance,
            secrets.admin_name(instance),
            admin,
            lambda pw: {"username": ADMIN_USER, "password": pw},
            keep=admin.password,
        )
    if not obs.app_complete:
        _write(
            ctx,
            instance,
            secrets.app_name(instance),
            app,
            lambda pw: _app_data(instance, app, pw),
            keep=app.password,
        )
    if not obs.cloudinit_matches or not obs.kept_follow_policy:
        doc = bootstrap.Bootstrap(
            admin_user=ADMIN_USER,
            admin_password=SecretStr(admin_password),
            memory_bytes=int(instance.model.spec.resources.memory_bytes()),
        )
        secrets.apply(
            kube,
            instance,
            secrets.cloudinit_name(instance),
            {bootstrap.USERDATA_KEY: bootstrap.to_userdata(doc)},
            uid=cloudinit.uid,
        )


def _write(
    ctx: Context,
    instance: Instance,
    name: str,
    current: secrets.Read,
    data_for: Callable[[str], dict[str, str]],
    *,
    keep: str = "",
) -> str:
    """Apply a Secret with the password it has (``keep``) or a new one; return the password.

    A 409 on the UID precondition means the Secret was deleted after it was read: a new
    password is made and applied without the precondition.
    """
    password = keep or secrets.new_password()
    try:
        secrets.apply(
            ctx.kube,
            instance,
            name,
            data_for(password),
            uid=current.uid,
            annotations=secrets.ours(current),
        )
    except k8s.ApiException as e:
        if not secrets.conflict(e):
            raise
        activity.logger.info("Secret %s was deleted after it was read; new password", name)
        password = secrets.new_password()
        secrets.apply(ctx.kube, instance, name, data_for(password), uid=None)
    return password


class Credentials(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        reads = read_all(self.ctx, instance)
        refused = ownership.gate(self.ctx.kube, STEP, CONDITION, instance, reads.children(instance))
        if refused is not None:
            return refused
        obs = observe(instance, reads)
        decision = decide(obs, secret_name=secrets.app_name(instance))
        if decision.outcome is Outcome.PENDING:
            ensure(self.ctx, instance, reads, obs)
        return decision
