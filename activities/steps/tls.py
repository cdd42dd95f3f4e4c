"""tls (TLSReady): the guest's PostgreSQL serves the instance's current certificate.

The credentials step puts the server certificate and key in the boot data; every boot
serves them (``dbi.bootstrap``). This step looks at what the server presents
(``activities.infra.trust.served``, no login) and compares it with the boot data's:

- the same: Satisfied;
- another certificate dbi still trusts (the one being renewed): dbi installs the new
  one over a verified connection as the admin (into the slot not in use,
  ``dbi.bootstrap.SLOTS``, written with ``lo_export``, whose parameters PostgreSQL never
  logs, then a reload); clients connected stay connected, new ones get the new
  certificate. When
  the admin credential does not log in, the old certificate, still valid, is served
  (Satisfied) until the admin step has recovered it;
- no TLS, or a certificate dbi does not trust (expired, another CA, other names): the
  private key is not sent over an unverified connection; the VM restarts to boot
  with its boot data when a restart is allowed (``resizePolicy: Restart`` within
  ``spec.maintenance.window``, or ``force_resize``), else the step holds
  (RestartRequired, or MaintenanceWindow until the window opens). A guest that booted with
  the certificate and still does not serve it is Terminal: its image cannot do TLS.

A stopped instance is skipped. Idempotency key: the slot the server does not use (it
changes only once a reload took the new pair); a retry writes the same files again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from activities.infra import addresses, admin_credential, members, postgres, secrets, trust
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance
from activities.steps.loop import Anatomy
from dbi import bootstrap, maintenance, tls
from dbi.maintenance import Restart
from dbi.pipeline import TLS as SPEC
from dbi.spec import PowerState, ResizePolicy
from dbi.steps import AT_ONCE, Common, Decision, StepInput

BOOT_CHECK_SECONDS = 2.0
HELD_CHECK_SECONDS = 300.0


class Reason(StrEnum):
    READY = SPEC.condition_type
    STOPPED = Common.STOPPED
    NO_CERTIFICATE = "NoCertificate"
    NO_ADDRESS = Common.NO_ADDRESS
    BOOTING = Common.BOOTING
    INSTALLED = "CertificateInstalled"
    RENEWAL_WAITS = "RenewalWaitsForAdmin"
    RESTARTING = Common.RESTARTING
    RESTART_REQUIRED = Common.RESTART_REQUIRED
    MAINTENANCE_WINDOW = Common.MAINTENANCE_WINDOW
    NOT_SERVED = "GuestServesNoCertificate"


class Action(StrEnum):
    INSTALL = "install"
    RESTART = "restart"


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool = False
    has_certificate: bool = True  # the boot data carries one (and the namespace a CA)
    address: str | None = None
    served: trust.Serves = trust.Serves.UNREACHABLE
    serves_current: bool = False  # what is served is the boot data's certificate
    serves_trusted: bool = False  # what is served verifies for the Service's names
    booted_with_current: bool = False  # the VMI started after the certificate was issued
    admin_logs_in: bool = False  # looked at only when dbi would install
    restart_allowed: bool = False
    hold: maintenance.Hold | None = None  # spec.maintenance.window, closed now (not forced)
    # The boot data's certificate (its fingerprint): the one the action installs.
    certificate: str = ""


def _before_serving(obs: Observation) -> Decision[Action] | None:
    """What stops the step before it can look at what is served (pure)."""
    if obs.stopped:
        message = "The instance is stopped, as asked; not checked."
        return SPEC.satisfied(Reason.STOPPED, message)
    if not obs.has_certificate:
        message = "The boot data has no server certificate yet (the credentials step issues it)."
        return SPEC.pending(Reason.NO_CERTIFICATE, message, after=1.0)
    if obs.address is None:
        message = "The VM has no address yet."
        return SPEC.pending(Reason.NO_ADDRESS, message, after=BOOT_CHECK_SECONDS)
    if obs.served is trust.Serves.UNREACHABLE:
        message = "PostgreSQL does not answer yet."
        return SPEC.pending(Reason.BOOTING, message, after=BOOT_CHECK_SECONDS)
    return None


def _untrusted(obs: Observation) -> Decision[Action]:
    """What serving no TLS, or a certificate dbi does not trust, calls for (pure)."""
    if obs.booted_with_current:
        message = (
            "The guest booted with its certificate and does not serve it: its image does "
            "not support dbi's TLS boot data (docs/operations.md)."
        )
        return SPEC.terminal(Reason.NOT_SERVED, message)
    when = maintenance.planned_restart(allowed=obs.restart_allowed, forced=False, hold=obs.hold)
    if when is Restart.AT_WINDOW and obs.hold is not None:
        message = obs.hold.message("The restart to serve its certificate")
        return SPEC.pending(Reason.MAINTENANCE_WINDOW, message[:512], after=obs.hold.seconds)
    if when is Restart.NOW:
        message = "The VM restarts to serve its certificate (it served none dbi trusts)."
        return SPEC.pending(Reason.RESTARTING, message, Action.RESTART, after=BOOT_CHECK_SECONDS)
    message = (
        "PostgreSQL serves no certificate dbi trusts; the VM serves its own at its next "
        "boot. resizePolicy is Deferred, so that waits for `dbi resize NAME --force`."
    )
    return SPEC.pending(Reason.RESTART_REQUIRED, message, after=HELD_CHECK_SECONDS)


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one change to make (pure)."""
    before = _before_serving(obs)
    if before is not None:
        return before
    if obs.serves_current:
        message = "PostgreSQL serves the instance's current certificate; plaintext is refused."
        return SPEC.satisfied(Reason.READY, message)
    if obs.serves_trusted and obs.admin_logs_in:
        message = "The renewed certificate was installed in the running server."
        return SPEC.pending(Reason.INSTALLED, message, Action.INSTALL, after=AT_ONCE)
    if obs.serves_trusted:
        message = (
            "PostgreSQL serves a valid certificate; the renewed one is installed once dbi's "
            "admin credential logs in (the admin step)."
        )
        return SPEC.satisfied(Reason.RENEWAL_WAITS, message)
    return _untrusted(obs)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    spec = instance.model.spec
    if spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    kube, home = ctx.kube, ctx.config.namespace
    doc = secrets.boot_data(secrets.read_boot(kube, instance))
    pair = doc.server_pair() if doc is not None else None
    ca = trust.recent_ca(kube, home, instance.namespace)
    if pair is None or ca is None:
        return Observation(has_certificate=False)
    vmi = addresses.vmi_of(ctx.kube, instance)
    address = addresses.address_of(vmi)
    restart_allowed = spec.resize_policy is ResizePolicy.RESTART or step_input.allow_restart
    obs = Observation(address=address, restart_allowed=restart_allowed)
    if address is None:
        return obs
    served = trust.served(address)
    names = members.certificate_names(instance)
    current = served.der is not None and tls.fingerprint(served.der) == tls.fingerprint(
        pair.cert_pem
    )
    trusted = tls.judge(served.der, ca.cert_pem, names).trusted
    created = ((vmi or {}).get("metadata") or {}).get("creationTimestamp")
    obs = Observation(
        address=address,
        served=served.serves,
        serves_current=current,
        serves_trusted=trusted,
        booted_with_current=booted_after_issue(created, pair.cert_pem),
        restart_allowed=restart_allowed,
        hold=maintenance.hold_now(spec, forced=step_input.allow_restart),
        certificate=tls.fingerprint(pair.cert_pem),
    )
    if current or not trusted:
        return obs
    password = admin_credential.read(kube, home, instance.uid).password
    server = trust.reach(instance, address, ca)
    return replace(
        obs, admin_logs_in=postgres.login(server, password=password) is postgres.Login.OK
    )


def booted_after_issue(created: str | None, cert_pem: str) -> bool:
    """Whether a VMI created at ``created`` booted with the certificate: it was created
    after the certificate was issued."""
    if not created:
        return False
    issued = tls.issued_at(cert_pem)
    started = datetime.fromisoformat(created.replace("Z", "+00:00")).astimezone(UTC)
    return started > issued + timedelta(seconds=1)


def install(server: postgres.Server, password: str, pair: tls.KeyPair) -> None:
    """Write the certificate and key into the slot the running server does not use, point
    its settings there and reload it: it serves the new certificate to new connections
    (PostgreSQL reloads TLS on SIGHUP; one it cannot load leaves the old one served).
    Each file goes as a bound parameter of ``lo_export``, never in SQL text."""
    with postgres.connect(server, password=password) as conn:
        row = conn.execute(
            "SELECT current_setting('data_directory'), current_setting('ssl_key_file')"
        ).fetchone()
        assert row is not None
        files = bootstrap.tls_files(pair.cert_pem, pair.key_pem, bootstrap.other_slot(row[1]))
        with conn.transaction():  # the large objects are gone at the end, whatever happens
            for name, content in files.items():
                made = conn.execute("SELECT lo_from_bytea(0, %s)", (content.encode(),)).fetchone()
                assert made is not None
                conn.execute("SELECT lo_export(%s, %s)", (made[0], f"{row[0]}/{name}"))
                conn.execute("SELECT lo_unlink(%s)", (made[0],))
        conn.execute("SELECT pg_reload_conf()")


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    """Install the certificate observed (one the boot data no longer carries is left
    alone: the next look observes the new one), or restart the VM."""
    if action is Action.INSTALL:
        assert obs.address is not None
        doc = secrets.boot_data(secrets.read_boot(ctx.kube, instance))
        pair = doc.server_pair() if doc is not None else None
        if pair is None or tls.fingerprint(pair.cert_pem) != obs.certificate:
            return
        home = ctx.config.namespace
        password = admin_credential.read(ctx.kube, home, instance.uid).password
        install(trust.server(ctx.kube, home, instance, obs.address), password, pair)
    elif action is Action.RESTART:
        ctx.kube.objects.delete_namespaced_custom_object(
            *KUBEVIRT, instance.namespace, "virtualmachineinstances", addresses.primary_of(instance)
        )


STEP = Anatomy(SPEC, observe, decide, act)
