"""admin (AdminReady): dbi's admin credential works in the guest, and stays fresh.

Observes a login as the admin with the credential's password (and with ``next``, a
password being rotated in), the pending reset, the VMI. Acts, one change per look:

- **rotation** (when ``DBI_ADMIN_ROTATION_INTERVAL`` has passed since the last, or on
  demand through ``rotate_admin_credentials``): ``next`` is written to the credential
  *first*, then ``ALTER ROLE`` sets its SCRAM verifier, a login proves it, and ``next``
  becomes ``password``. A crash anywhere leaves one password that works and at most
  one other that dbi knows: a later look finishes or promotes whichever logs in.
- **break-glass recovery** of a credential the guest refuses (or one the credentials
  step made anew for a lost one): a new password with a reset token, which the boot
  data carries; then the guest restarts (under ``resizePolicy: Restart``, or when a
  ``force_resize`` allows it; otherwise it waits, ``AdminResetHeld``) and sets it at
  boot; the first login that works clears the reset.

A stopped instance is skipped. Idempotency key: the admin credential (each write names
the UID it read, and ``next`` is written before ALTER ROLE); a restart
is asked for the VMI it recorded, again if that VMI is still there.
"""

from __future__ import annotations

import secrets as token
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from psycopg import sql

from activities.infra import addresses, admin_credential, postgres, secrets, trust
from activities.infra.admin_credential import Credential
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance
from activities.infra.postgres import Login
from activities.steps.loop import Anatomy
from dbi import maintenance, scram
from dbi.config import ADMIN_USER
from dbi.maintenance import Restart
from dbi.pipeline import ADMIN as SPEC
from dbi.spec import PowerState, ResizePolicy
from dbi.steps import AT_ONCE, Common, Decision, StepInput

BOOT_CHECK_SECONDS = 2.0
HELD_CHECK_SECONDS = 300.0


class Reason(StrEnum):
    READY = SPEC.condition_type
    STOPPED = Common.STOPPED
    NO_ADDRESS = Common.NO_ADDRESS
    BOOTING = Common.BOOTING
    ROTATED = "AdminRotated"
    RESET_REQUESTED = "AdminResetRequested"
    RESET_RESTARTING = "AdminResetRestarting"
    RESET_HELD = "AdminResetHeld"
    RESET_DONE = "AdminResetDone"
    RESET_FAILED = "AdminResetFailed"
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW
    INSECURE = postgres.INSECURE_REASON


class Action(StrEnum):
    ROTATE = "rotate"  # write next, then as FINISH_ROTATION
    FINISH_ROTATION = "finish-rotation"  # ALTER ROLE to next, prove it, promote it
    PROMOTE_NEXT = "promote-next"  # next already logs in
    CLEAR_RESET = "clear-reset"
    REQUEST_RESET = "request-reset"
    RESTART = "restart"


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool
    address: str | None = None
    login: Login = Login.UNREACHABLE  # with the credential's password
    next_login: Login | None = None  # with next; None: no rotation under way
    reset: bool = False  # a reset token is pending
    boot_data_ready: bool = False  # the cloud-init Secret carries that reset
    reset_vmi: str | None = None  # the VMI restarted for it
    vmi_uid: str | None = None
    rotation_due: bool = False
    restart_allowed: bool = False
    hold: maintenance.Hold | None = None  # spec.maintenance.window, closed now (not forced)
    # The credential's resourceVersion as read: the action writes over that one only.
    credential_version: str | None = None


def _logged_in(obs: Observation) -> Decision[Action]:
    """What a working admin password calls for (pure)."""
    if obs.reset:
        message = "The guest took the new admin password."
        return SPEC.pending(Reason.RESET_DONE, message, Action.CLEAR_RESET, after=AT_ONCE)
    if obs.next_login is not None:
        return SPEC.pending(
            Reason.ROTATED, "The admin password was rotated.", Action.FINISH_ROTATION, after=AT_ONCE
        )
    if obs.rotation_due:
        return SPEC.pending(
            Reason.ROTATED, "The admin password was rotated.", Action.ROTATE, after=AT_ONCE
        )
    return SPEC.satisfied(Reason.READY, "dbi's admin credential logs in.")


def _refused(obs: Observation) -> Decision[Action]:
    """What a refused admin password calls for (pure)."""
    if obs.next_login is Login.OK:
        message = "A rotated admin password was completed."
        return SPEC.pending(Reason.ROTATED, message, Action.PROMOTE_NEXT, after=AT_ONCE)
    if not obs.reset:
        message = "PostgreSQL refuses dbi's admin password: a new one is set at the next boot."
        return SPEC.pending(Reason.RESET_REQUESTED, message, Action.REQUEST_RESET, after=AT_ONCE)
    if not obs.boot_data_ready:
        message = "The admin password's reset waits for the boot data."
        return SPEC.pending(Reason.RESET_REQUESTED, message, after=1.0)
    if obs.reset_vmi is None or obs.reset_vmi == obs.vmi_uid:
        return _restart_for_reset(obs)
    message = (
        "The guest booted with the reset and still refuses the admin password; see "
        "docs/operations.md, break-glass recovery."
    )
    return SPEC.terminal(Reason.RESET_FAILED, message)


def _restart_for_reset(obs: Observation) -> Decision[Action]:
    """The restart a pending reset needs: now, at the window, or when forced (pure)."""
    when = maintenance.planned_restart(allowed=obs.restart_allowed, forced=False, hold=obs.hold)
    if when is Restart.AT_WINDOW and obs.hold is not None:
        message = obs.hold.message("The restart to set the new admin password")
        return SPEC.pending(Reason.MAINTENANCE_WINDOW, message[:512], after=obs.hold.seconds)
    if when is Restart.NOW:
        message = "The VM restarts to set the new admin password."
        return SPEC.pending(
            Reason.RESET_RESTARTING, message, Action.RESTART, after=BOOT_CHECK_SECONDS
        )
    message = (
        "The admin password is reset at the next boot; resizePolicy is Deferred, so it "
        "waits for `dbi resize NAME --force` (a force_resize update)."
    )
    return SPEC.pending(Reason.RESET_HELD, message, after=HELD_CHECK_SECONDS)


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""
    if obs.stopped:
        return SPEC.satisfied(Reason.STOPPED, "The instance is stopped, as asked; not checked.")
    if obs.address is None:
        return SPEC.pending(
            Reason.NO_ADDRESS, "The VM has no address yet.", after=BOOT_CHECK_SECONDS
        )
    if obs.login is Login.UNREACHABLE:
        message = "PostgreSQL does not answer yet."
        return SPEC.pending(Reason.BOOTING, message, after=BOOT_CHECK_SECONDS)
    if Login.INSECURE in (obs.login, obs.next_login):
        # Not a refusal: no reset or rotation answers a guest that asks insecurely.
        return SPEC.terminal(Reason.INSECURE, postgres.INSECURE_MESSAGE)
    return _logged_in(obs) if obs.login is Login.OK else _refused(obs)


def rotation_due(credential: Credential, interval: float | None, now: datetime) -> bool:
    """Whether the scheduled rotation's time has come (pure); never without a schedule."""
    last = credential.rotated_at()
    return interval is not None and last is not None and now - last >= timedelta(seconds=interval)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    credential = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid)
    spec = instance.model.spec
    if spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    vmi = addresses.vmi_of(ctx.kube, instance)
    address = addresses.address_of(vmi)
    obs = Observation(
        stopped=False,
        address=address,
        reset=credential.reset is not None,
        reset_vmi=credential.reset_vmi,
        vmi_uid=(vmi or {}).get("metadata", {}).get("uid"),
        rotation_due=rotation_due(credential, ctx.config.admin_rotation_seconds, datetime.now(UTC)),
        restart_allowed=spec.resize_policy is ResizePolicy.RESTART or step_input.allow_restart,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
        credential_version=credential.resource_version,
    )
    if address is None:
        return obs
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    login = postgres.login(server, password=credential.password)
    next_login = postgres.login(server, password=credential.next) if credential.next else None
    ready = credential.reset is not None and _boot_data_carries(ctx, instance, credential)
    return replace(obs, login=login, next_login=next_login, boot_data_ready=ready)


def _boot_data_carries(ctx: Context, instance: Instance, credential: Credential) -> bool:
    doc = secrets.boot_data(secrets.read_boot(ctx.kube, instance))
    return doc is not None and doc.reset == credential.reset


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    """Perform ``action`` on the credential as observed; one written since is left
    alone (the next look observes it)."""
    credential = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid)
    if credential.resource_version == obs.credential_version:
        perform(ctx, instance, credential, action, obs)


def perform(
    ctx: Context,
    instance: Instance,
    credential: Credential,
    action: Action,
    obs: Observation,
    stamp: dict[str, str] | None = None,
) -> None:
    """Perform the decided action: a write of the credential, ALTER ROLE, a restart;
    ``stamp``: annotations the final write adds (an on-demand rotation's request id)."""

    def write(data: dict[str, str], **annotations: str | None) -> Credential:
        kept = {**admin_credential.kept_annotations(credential), **annotations}
        admin_credential.write(
            ctx.kube,
            ctx.config.namespace,
            instance,
            data,
            annotations=kept,
            read_uid=credential.uid,
        )
        present = {k: v for k, v in kept.items() if v is not None}
        return Credential(uid=credential.uid, data=data, annotations=present)

    now = admin_credential.now()
    if action is Action.ROTATE:
        credential = write({"password": credential.password, "next": secrets.new_password()})
        action = Action.FINISH_ROTATION
    if action is Action.FINISH_ROTATION:
        assert obs.address is not None
        finish_rotation(
            trust.server(ctx.kube, ctx.config.namespace, instance, obs.address), credential
        )
        write({"password": credential.next}, **{admin_credential.ROTATED_AT: now}, **(stamp or {}))
    elif action is Action.PROMOTE_NEXT:
        write({"password": credential.next}, **{admin_credential.ROTATED_AT: now}, **(stamp or {}))
    elif action is Action.CLEAR_RESET:
        write(
            {"password": credential.password},
            **{admin_credential.RESET: None, admin_credential.RESET_VMI: None},
        )
    elif action is Action.REQUEST_RESET:
        write(
            {"password": secrets.new_password()},
            **{
                admin_credential.RESET: token.token_hex(8),
                admin_credential.RESET_VMI: None,
                admin_credential.ROTATED_AT: now,
            },
        )
    elif action is Action.RESTART and obs.vmi_uid is not None:
        # Recorded first: a crash before the restart finds the record and restarts the
        # VMI it names again (deleting a VMI being deleted is harmless).
        write({"password": credential.password}, **{admin_credential.RESET_VMI: obs.vmi_uid})
        ctx.kube.objects.delete_namespaced_custom_object(
            *KUBEVIRT, instance.namespace, "virtualmachineinstances", addresses.primary_of(instance)
        )


def finish_rotation(server: postgres.Server, credential: Credential) -> None:
    """Set ``next`` as the admin role's password (its verifier only), as the admin with
    the current password, and prove it logs in; raise if it does not (retried)."""
    with postgres.connect(server, password=credential.password) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(
                sql.Identifier(ADMIN_USER), sql.Literal(scram.verifier(credential.next))
            )
        )
    if postgres.login(server, password=credential.next) is not Login.OK:
        raise RuntimeError("the rotated admin password does not log in")


STEP = Anatomy(SPEC, observe, decide, act)
