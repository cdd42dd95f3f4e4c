"""rotate_credentials: a new app password on demand (behind the workflow's update).

The new password is set on the role first, then written to the Secret with its UID
precondition and the request's id (``dbi.dev/rotation-id``), then verified by logging
in. A retry of the same request finds its id on the Secret and does not rotate again.
If the role was changed but the Secret write failed, the retry makes another password:
only the one in the Secret counts, and the access step keeps the role in line with it.
"""

from __future__ import annotations

from kubernetes import client as k8s
from psycopg import sql
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.infra import addresses, admin_credential, connection, postgres, secrets, trust
from activities.infra.context import Activity, Context
from activities.infra.kube import Instance
from activities.steps import admin
from activities.steps.loop import load
from dbi import pipeline, scram
from dbi.messages import RotationRequest, RotationResult
from dbi.steps import StepInput


class RotateCredentials(Activity):
    @activity.defn(name=pipeline.ROTATE_CREDENTIALS)
    def run(self, request: RotationRequest) -> RotationResult:
        step_input = StepInput(namespace=request.namespace, name=request.name, uid=request.uid)
        instance = load(self.ctx, step_input)
        if instance is None:
            raise ApplicationError(
                "the instance no longer exists", type="InstanceGone", non_retryable=True
            )
        kube, name = self.ctx.kube, secrets.app_name(instance)
        app = secrets.read(kube, instance.namespace, name)
        if app.annotations.get(secrets.ROTATION_ANNOTATION) == request.request_id:
            return RotationResult(
                secret_name=name, resource_version=app.resource_version or "", rotated=False
            )
        host = addresses.address_of(addresses.vmi_of(kube, instance))
        if host is None:
            raise ApplicationError(
                "the instance is not running; start it to rotate",
                type="NotRunning",
                non_retryable=True,
            )
        creds = instance.model.spec.credentials
        admin = admin_credential.read(kube, self.ctx.config.namespace, instance.uid)
        password = secrets.new_password()
        ca = trust.recent_ca(kube, self.ctx.config.namespace, instance.namespace)
        server = trust.reach(instance, host, ca)
        with postgres.connect(server, password=admin.password) as conn:
            conn.execute(
                sql.SQL("ALTER ROLE {} WITH LOGIN PASSWORD {}").format(
                    sql.Identifier(creds.username), sql.Literal(scram.verifier(password))
                )
            )
        data = {
            **app.data,
            "username": creds.username,
            "database": creds.database,
            "password": password,
            **connection.keys(
                creds.username,
                password,
                creds.database,
                *connection.endpoint(self.ctx, instance),
                ca_pem=ca.cert_pem if ca is not None else "",
            ),
            **connection.ro_keys(
                creds.username,
                password,
                creds.database,
                connection.ro_endpoint(self.ctx, instance),
            ),
        }
        marker = {secrets.ROTATION_ANNOTATION: request.request_id}
        try:
            written = secrets.apply(
                kube, instance, name, data, read=app.uid_only(), annotations=marker
            )
        except k8s.ApiException as e:
            if not secrets.conflict(e):
                raise
            written = secrets.apply(
                kube, instance, name, data, read=secrets.NONE, annotations=marker
            )
        if not postgres.authenticates(
            server, user=creds.username, password=password, dbname=creds.database
        ):
            raise RuntimeError("the new app password does not authenticate")  # retried
        meta = written.metadata
        return RotationResult(
            secret_name=name,
            resource_version=(meta.resource_version if meta else "") or "",
            rotated=True,
        )


def rotate_admin(ctx: Context, instance: Instance, request_id: str) -> bool:
    """Rotate the admin password on demand (``rotate_admin_credentials``); return False
    when this request was already carried out (its id is on the credential). Refuses,
    with an ApplicationError the caller reads, when the credential does not log in."""
    credential = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid)
    if credential.annotations.get(admin_credential.REQUEST) == request_id:
        return False
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None:
        raise ApplicationError(
            "the instance is not running; start it to rotate", type="NotRunning", non_retryable=True
        )
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    obs = admin.Observation(
        stopped=False,
        address=address,
        login=postgres.login(server, password=credential.password),
        next_login=postgres.login(server, password=credential.next) if credential.next else None,
    )
    if obs.login is not postgres.Login.OK and obs.next_login is not postgres.Login.OK:
        raise ApplicationError(
            "dbi's admin credential does not log in now; the admin step recovers it",
            type="AdminNotReady",
            non_retryable=True,
        )
    stamp = {admin_credential.REQUEST: request_id}
    if obs.next_login is postgres.Login.OK:
        admin.perform(ctx, instance, credential, admin.Action.PROMOTE_NEXT, obs, stamp)
    else:
        action = admin.Action.FINISH_ROTATION if credential.next else admin.Action.ROTATE
        admin.perform(ctx, instance, credential, action, obs, stamp)
    return True


class RotateAdminCredentials(Activity):
    @activity.defn(name=pipeline.ROTATE_ADMIN_CREDENTIALS)
    def run(self, request: RotationRequest) -> RotationResult:
        """Rotate dbi's admin password now (``rotate_admin``): the new one is written
        before ALTER ROLE and proven before it is the one. Neither the app role nor its
        connections notice."""
        step_input = StepInput(namespace=request.namespace, name=request.name, uid=request.uid)
        instance = load(self.ctx, step_input)
        if instance is None:
            raise ApplicationError(
                "the instance no longer exists", type="InstanceGone", non_retryable=True
            )
        rotated = rotate_admin(self.ctx, instance, request.request_id)
        return RotationResult(
            secret_name=f"{self.ctx.config.namespace}/{admin_credential.name_for(instance.uid)}",
            resource_version="",
            rotated=rotated,
        )
