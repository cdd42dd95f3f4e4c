"""settings (SettingsApplied): PostgreSQL runs with ``spec.postgresql.parameters`` (and
the ``archive_timeout`` of ``spec.backup.archiveTimeout``).

dbi owns ``postgresql.auto.conf``: it holds the declared parameters and nothing else.
The step logs in as the admin and reads ``pg_settings`` for each declared name (its
type, unit, range, context), what ``postgresql.auto.conf`` holds now
(``pg_file_settings``) and which settings wait for a restart. A value the server would
not take is Terminal, naming ``spec.postgresql.parameters.<name>`` (nothing written);
otherwise it writes what differs with ``ALTER SYSTEM SET`` (and ``RESET`` for a name
no longer declared), then reloads. A setting that needs a restart (context
postmaster, one of ``dbi.parameters.RESTART_ALLOWED``, whose memory preflight checked)
is restarted into as a resize is: under ``resizePolicy: Restart`` in the
maintenance window (Pending MaintenanceWindow until it opens), at once on a
``force_resize`` or the restart annotation, else Pending RestartRequired; status
lists it meanwhile (``status.observed.pendingRestart``). An instance that declares
nothing and was last seen with nothing written is not logged into. Idempotency: the
file is compared before writing; a restart deletes the VMI observed (its UID as a
precondition), so a retry after the restart deletes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import psycopg
from kubernetes import client as k8s
from psycopg import sql
from temporalio import activity

from activities.infra import addresses, admin_credential, postgres, trust
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance
from activities.steps.loop import Anatomy, Refused
from dbi import maintenance
from dbi.backup_spec import Backup
from dbi.maintenance import Restart
from dbi.parameters import PostgreSQL, Setting, problem
from dbi.pipeline import SETTINGS as SPEC
from dbi.spec import PowerState, ResizePolicy
from dbi.steps import AT_ONCE, Common, Decision, StepInput

BOOT_CHECK_SECONDS = 2.0
RELOAD_CHECK_SECONDS = 1.0
DEFERRED_CHECK_SECONDS = 300.0
AUTO_CONF = "postgresql.auto.conf"


class Reason(StrEnum):
    APPLIED = SPEC.condition_type
    STOPPED = Common.STOPPED
    NO_ADDRESS = Common.NO_ADDRESS
    BOOTING = Common.BOOTING
    INVALID = "InvalidParameter"
    WRITTEN = "SettingsWritten"
    RELOADING = "Reloading"
    REFUSED = "ParameterRefused"
    RESTARTING = Common.RESTARTING
    RESTART_REQUIRED = Common.RESTART_REQUIRED
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW


class Action(StrEnum):
    WRITE = "write"  # ALTER SYSTEM what differs, then reload
    RELOAD = "reload"
    RESTART = "restart"


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool = False
    declared: dict[str, str] = field(default_factory=dict)
    looked: bool = True  # logged in (False: nothing declared, nothing written last time)
    address: str | None = None
    reachable: bool = False
    settings: dict[str, Setting] = field(default_factory=dict)  # pg_settings of declared
    written: dict[str, str] = field(default_factory=dict)  # postgresql.auto.conf now
    not_reloaded: tuple[str, ...] = ()  # written, and not in force in a new session
    pending_restart: tuple[str, ...] = ()
    refused: str | None = None  # the parameter ALTER SYSTEM refused, by the last action
    policy: ResizePolicy = ResizePolicy.RESTART
    allow_restart: bool = False
    hold: maintenance.Hold | None = None
    vmi_uid: str | None = None


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""
    if (unseen := _unseen(obs)) is not None:
        return unseen
    problems = [problem(n, v, obs.settings.get(n)) for n, v in sorted(obs.declared.items())]
    if found := [p for p in problems if p is not None]:
        return SPEC.terminal(Reason.INVALID, _joined(found))
    facts: dict[str, Any] = {
        "parameters": tuple(sorted(obs.declared)),
        "pending_restart": obs.pending_restart,
    }
    if obs.written != obs.declared:
        changed = sorted(set(obs.written.items()) ^ set(obs.declared.items()))
        names = sorted({n for n, _ in changed})
        message = f"Writing {', '.join(names)} (ALTER SYSTEM), then reloading."
        return SPEC.pending(Reason.WRITTEN, message[:512], Action.WRITE, after=AT_ONCE, **facts)
    if obs.not_reloaded:
        message = f"PostgreSQL reloads its configuration for {', '.join(obs.not_reloaded)}."
        return SPEC.pending(
            Reason.RELOADING, message[:512], Action.RELOAD, after=RELOAD_CHECK_SECONDS, **facts
        )
    if obs.pending_restart:
        return _restart(obs, facts)
    count = len(obs.declared)
    return SPEC.satisfied(Reason.APPLIED, f"{count} declared parameter(s) in force.", **facts)


def _unseen(obs: Observation) -> Decision[Action] | None:
    """The outcome when there is no server to look at (pure); None when there is one."""
    if obs.stopped:
        return SPEC.satisfied(Reason.STOPPED, "The instance is stopped, as asked; not checked.")
    if not obs.looked:
        return SPEC.satisfied(
            Reason.APPLIED, "No parameters are declared.", parameters=(), pending_restart=()
        )
    if obs.address is None:
        message = "The VM has no address yet."
        return SPEC.pending(Reason.NO_ADDRESS, message, after=BOOT_CHECK_SECONDS)
    if not obs.reachable:
        message = "PostgreSQL does not answer yet."
        return SPEC.pending(Reason.BOOTING, message, after=BOOT_CHECK_SECONDS)
    return None


def _restart(obs: Observation, facts: dict[str, Any]) -> Decision[Action]:
    """The restart pending settings need: now, at the window, or when forced (pure)."""
    names = ", ".join(obs.pending_restart)
    allowed = obs.policy is ResizePolicy.RESTART
    when = maintenance.planned_restart(allowed=allowed, forced=obs.allow_restart, hold=obs.hold)
    if when is Restart.NOW:
        message = f"The VM restarts to take {names}."
        return SPEC.pending(
            Reason.RESTARTING, message[:512], Action.RESTART, after=BOOT_CHECK_SECONDS, **facts
        )
    if when is Restart.AT_WINDOW and obs.hold is not None:
        message = obs.hold.message(f"The restart for {names}")
        return SPEC.pending(
            Reason.MAINTENANCE_WINDOW, message[:512], after=obs.hold.seconds, held=True, **facts
        )
    message = (
        f"{names} take effect at a restart; resizePolicy is Deferred, so it waits for "
        "`dbi resize NAME --force` (a force_resize update)."
    )
    return SPEC.pending(
        Reason.RESTART_REQUIRED, message[:512], after=DEFERRED_CHECK_SECONDS, held=True, **facts
    )


def _joined(problems: list[str]) -> str:
    text = "; ".join(problems)
    return text if len(text) <= 512 else text[:509] + "..."


# Observing -----------------------------------------------------------------------

_SETTINGS = """
SELECT name, vartype, context, unit, min_val, max_val, enumvals, pending_restart,
       source, sourcefile
  FROM pg_settings
 WHERE name = ANY(%s) OR (pending_restart AND sourcefile LIKE '%%/postgresql.auto.conf')
"""
_WRITTEN = """
SELECT name, setting FROM pg_file_settings
 WHERE sourcefile = current_setting('data_directory') || '/postgresql.auto.conf'
 ORDER BY seqno
"""


@dataclass(frozen=True)
class Read:
    settings: dict[str, Setting]
    written: dict[str, str]
    not_reloaded: tuple[str, ...]
    pending_restart: tuple[str, ...]


def read(server: postgres.Server, password: str, declared: dict[str, str]) -> Read:
    """What the server says of the declared settings and of its postgresql.auto.conf."""
    with postgres.connect(server, password=password) as conn:
        written = {str(n): str(v) for n, v in conn.execute(_WRITTEN).fetchall()}
        rows = conn.execute(_SETTINGS, [list({*declared, *written})]).fetchall()
    settings, pending, waiting = {}, [], []
    for name, vartype, context, unit, low, high, enumvals, restart, source, sourcefile in rows:
        # One dbi wrote or reset; not one of the size's, which the next start takes.
        if restart:
            pending.append(str(name))
        if name not in declared:
            continue
        settings[name] = Setting(
            name=name,
            vartype=vartype,
            context=context,
            unit=unit,
            min_val=low,
            max_val=high,
            enumvals=tuple(enumvals or ()),
        )
        from_file = source in ("default", "configuration file")
        elsewhere = not str(sourcefile or "").endswith("/" + AUTO_CONF)
        if name in written and not restart and context != "postmaster" and from_file and elsewhere:
            waiting.append(str(name))
    return Read(settings, written, tuple(sorted(waiting)), tuple(sorted(pending)))


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    spec = instance.model.spec
    if spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    declared = PostgreSQL.declared(spec.postgresql) | Backup.parameters(spec.backup)
    seen = instance.model.status.observed
    if not declared and seen is not None and seen.parameters == []:
        return Observation(looked=False)
    vmi = addresses.vmi_of(ctx.kube, instance)
    address = addresses.address_of(vmi)
    base = Observation(
        declared=declared,
        address=address,
        policy=spec.resize_policy,
        allow_restart=step_input.allow_restart,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
        vmi_uid=(vmi or {}).get("metadata", {}).get("uid"),
    )
    if not address:
        return base
    admin = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid)
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    try:
        seen_now = read(server, admin.password, declared)
    except psycopg.OperationalError as e:
        activity.logger.info("settings: reading %s failed: %s", address, type(e).__name__)
        return base
    return replace(
        base,
        reachable=True,
        settings=seen_now.settings,
        written=seen_now.written,
        not_reloaded=seen_now.not_reloaded,
        pending_restart=seen_now.pending_restart,
    )


# Acting --------------------------------------------------------------------------


def statements(declared: dict[str, str], written: dict[str, str]) -> list[tuple[str, sql.Composed]]:
    """The ALTER SYSTEM statements, by parameter, that make postgresql.auto.conf hold
    ``declared``."""
    out = []
    for name in sorted(set(written) - set(declared)):
        ident = sql.Identifier(*name.split("."))
        out.append((name, sql.SQL("ALTER SYSTEM RESET {}").format(ident)))
    for name, value in sorted(declared.items()):
        if written.get(name) != value:
            ident = sql.Identifier(*name.split("."))
            out.append(
                (name, sql.SQL("ALTER SYSTEM SET {} = {}").format(ident, sql.Literal(value)))
            )
    return out


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    if action is Action.RESTART:
        if obs.vmi_uid is None:
            return
        only_that = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=obs.vmi_uid))
        ctx.kube.objects.delete_namespaced_custom_object(
            *KUBEVIRT,
            instance.namespace,
            "virtualmachineinstances",
            addresses.primary_of(instance),
            body=only_that,
        )
        return
    assert obs.address is not None
    home = ctx.config.namespace
    password = admin_credential.read(ctx.kube, home, instance.uid).password
    server = trust.server(ctx.kube, home, instance, obs.address)
    refused: list[str] = []
    with postgres.connect(server, password=password) as conn:
        if action is Action.WRITE:
            for name, statement in statements(obs.declared, obs.written):
                try:
                    conn.execute(statement)
                except (
                    psycopg.errors.DataError,
                    psycopg.errors.SyntaxErrorOrAccessRuleViolation,
                ) as e:
                    said = e.diag.message_primary or type(e).__name__
                    activity.logger.warning("settings: PostgreSQL refuses %s: %s", name, said)
                    refused.append(
                        f"spec.postgresql.parameters.{name}: PostgreSQL refuses it ({said})"
                    )
        conn.execute("SELECT pg_reload_conf()")
    if refused:
        message = _joined(refused)
        raise Refused(SPEC.terminal(Reason.REFUSED, message).result)


STEP = Anatomy(SPEC, observe, decide, act)
