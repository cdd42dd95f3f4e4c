"""health (DatabaseHealthy): PostgreSQL answers as the admin on the VM's address.

Connects with a short timeout: ``SELECT 1``, the server version, recovery state.
Publishes the endpoint and those facts. A database that is still booting is Pending
with a timed fallback; a stopped instance is skipped (Satisfied, reason Stopped).
Acts on nothing, so it has no idempotency key to keep.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import psycopg
from temporalio import activity

from activities.infra import addresses, admin_credential, postgres, trust
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.infra.postgres import Login, major
from activities.steps.loop import Anatomy
from dbi import names
from dbi.pipeline import HEALTH as SPEC
from dbi.spec import PowerState
from dbi.steps import Common, Decision, StepInput

BOOT_CHECK_SECONDS = 2.0


class Reason(StrEnum):
    HEALTHY = "Healthy"
    STOPPED = Common.STOPPED
    NO_ADDRESS = Common.NO_ADDRESS
    BOOTING = Common.BOOTING
    IN_RECOVERY = "InRecovery"
    ADMIN_REFUSED = "AdminPasswordRefused"
    AUTH_INSECURE = postgres.INSECURE_REASON
    VERSION_MISMATCH = "VersionMismatch"


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool
    address: str | None = None
    reachable: bool = False
    version: str | None = None
    in_recovery: bool = False
    login: Login = Login.OK  # how the admin's login went, when it failed
    # The endpoint clients use: the instance's Service (access.service_host).
    service_host: str | None = None
    spec_version: int | None = None  # the major spec.version asks for


# A login that failed on the server's answer: neither waiting nor retrying helps.
_LOGIN_FAILED = {
    Login.REFUSED: (
        Reason.ADMIN_REFUSED,
        "PostgreSQL refuses dbi's admin password; the admin step recovers it.",
    ),
    Login.INSECURE: (Reason.AUTH_INSECURE, postgres.INSECURE_MESSAGE),
}


def decide(obs: Observation) -> Decision[None]:
    """Return the outcome of a health observation (pure); health never acts."""
    if obs.stopped:
        return SPEC.satisfied(Reason.STOPPED, "The instance is stopped, as asked; not checked.")
    unhealthy = _unhealthy(obs)
    if unhealthy is not None:
        return unhealthy
    return SPEC.satisfied(
        Reason.HEALTHY,
        "PostgreSQL answers.",
        endpoint_host=obs.service_host,
        endpoint_port=postgres.PORT,
        postgres_version=obs.version,
        address=obs.address,
    )


def _unhealthy(obs: Observation) -> Decision[None] | None:
    """Why a running instance is not healthy (pure); None when it is."""
    version = obs.version
    if obs.address is None:
        message = "The VM has no address yet."
        return SPEC.pending(
            Reason.NO_ADDRESS, message, after=BOOT_CHECK_SECONDS, postgres_version=version
        )
    if obs.login in _LOGIN_FAILED:
        reason, message = _LOGIN_FAILED[obs.login]
        return SPEC.terminal(reason, message, postgres_version=version)
    if not obs.reachable:
        message = "PostgreSQL does not answer yet."
        return SPEC.pending(
            Reason.BOOTING, message, after=BOOT_CHECK_SECONDS, postgres_version=version
        )
    if obs.in_recovery:
        message = "PostgreSQL is in recovery."
        return SPEC.pending(
            Reason.IN_RECOVERY, message, after=BOOT_CHECK_SECONDS, postgres_version=version
        )
    if obs.spec_version is not None and major(version) not in (None, obs.spec_version):
        message = (
            f"PostgreSQL {version} runs, but spec.version is {obs.spec_version}: the "
            "image (spec.image) is of another major."
        )
        return SPEC.terminal(Reason.VERSION_MISMATCH, message, postgres_version=version)
    return None


@dataclass(frozen=True)
class Probe:
    """What logging in as the admin showed."""

    reachable: bool
    version: str | None = None
    in_recovery: bool = False
    login: Login = Login.OK


def probe(server: postgres.Server, password: str) -> Probe:
    """Log in as the admin: the server's version and recovery state, or why not."""
    try:
        with postgres.connect(server, password=password) as conn:
            conn.execute("SELECT 1")
            row = conn.execute(
                "SELECT current_setting('server_version'), pg_is_in_recovery()"
            ).fetchone()
    except psycopg.OperationalError as e:
        activity.logger.info("health probe of %s failed: %s", server.address, type(e).__name__)
        return Probe(reachable=False, login=postgres.login_failure(e))
    assert row is not None
    return Probe(reachable=True, version=str(row[0]), in_recovery=bool(row[1]))


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    if instance.model.spec.power_state is PowerState.STOPPED:
        return Observation(stopped=True)
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if not address:
        return Observation(stopped=False)
    admin = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid)
    server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
    seen = probe(server, admin.password)
    return Observation(
        stopped=False,
        address=address,
        reachable=seen.reachable,
        version=seen.version,
        in_recovery=seen.in_recovery,
        login=seen.login,
        service_host=names.service_host(instance.namespace, instance.name),
        spec_version=int(instance.model.spec.version),
    )


STEP = Anatomy(SPEC, observe, decide)
