"""health (DatabaseHealthy): PostgreSQL answers as the admin on the VM's address.

Connects with a short timeout: ``SELECT 1``, the server version, recovery state.
Publishes the endpoint and those facts. A database that is still booting is Pending
with a timed fallback; a stopped instance is skipped (Satisfied, reason Stopped).
Acts on nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import psycopg
from temporalio import activity

from activities import admin_credential, postgres
from activities.context import Step, result
from activities.kube import KUBEVIRT, Instance
from dbi.models import PowerState
from dbi.steps import Outcome, StepInput, StepResult

STEP, CONDITION = "health", "DatabaseHealthy"
BOOT_CHECK = 2.0


class Reason(StrEnum):
    HEALTHY = "Healthy"
    STOPPED = "Stopped"
    NO_ADDRESS = "NoAddress"
    BOOTING = "Booting"
    IN_RECOVERY = "InRecovery"
    ADMIN_REFUSED = "AdminPasswordRefused"


@dataclass(frozen=True)
class Observation:
    stopped: bool
    address: str | None
    reachable: bool
    version: str | None
    in_recovery: bool
    admin_refused: bool = False


def decide(obs: Observation) -> StepResult:
    """Return the outcome of a health observation (pure)."""

    def pending(reason: Reason, message: str) -> StepResult:
        return result(STEP, CONDITION, Outcome.PENDING, reason, message, requeue_after=BOOT_CHECK)

    if obs.stopped:
        return result(
            STEP,
            CONDITION,
            Outcome.SATISFIED,
            Reason.STOPPED,
            "The instance is stopped, as asked; not checked.",
        )
    if obs.address is None:
        return pending(Reason.NO_ADDRESS, "The VM has no address yet.")
    if obs.admin_refused:
        return result(
            STEP,
            CONDITION,
            Outcome.TERMINAL,
            Reason.ADMIN_REFUSED,
            "PostgreSQL refuses dbi's admin password; the admin step recovers it.",
        )
    if not obs.reachable:
        return pending(Reason.BOOTING, "PostgreSQL does not answer yet.")
    if obs.in_recovery:
        return pending(Reason.IN_RECOVERY, "PostgreSQL is in recovery.")
    return result(
        STEP,
        CONDITION,
        Outcome.SATISFIED,
        Reason.HEALTHY,
        "PostgreSQL answers.",
        endpoint_host=obs.address,
        endpoint_port=postgres.PORT,
        postgres_version=obs.version,
    )


def probe(address: str, password: str) -> tuple[bool, str | None, bool, bool]:
    """Return (reachable, server version, in recovery, admin refused) as the admin sees it."""
    try:
        with postgres.connect(address, password=password) as conn:
            conn.execute("SELECT 1")
            row = conn.execute(
                "SELECT current_setting('server_version'), pg_is_in_recovery()"
            ).fetchone()
    except psycopg.OperationalError as e:
        # The server answered and said no (libpq reports it in the message, no sqlstate).
        refused = "password authentication failed" in str(e)
        activity.logger.info("health probe of %s failed: %s", address, type(e).__name__)
        return False, None, False, refused
    assert row is not None
    return True, str(row[0]), bool(row[1]), False


class Health(Step):
    @activity.defn(name=STEP)
    def run(self, step_input: StepInput) -> StepResult:
        return self.on(step_input, STEP, CONDITION)

    def converge(self, instance: Instance, step_input: StepInput) -> StepResult:
        stopped = instance.model.spec.power_state is PowerState.STOPPED
        address, reachable, version, recovery, refused = None, False, None, False, False
        if not stopped:
            vmi = self.ctx.kube.get_custom(
                *KUBEVIRT, instance.namespace, "virtualmachineinstances", instance.name
            )
            interfaces = (vmi or {}).get("status", {}).get("interfaces", [])
            address = interfaces[0].get("ipAddress") if interfaces else None
            if address:
                admin = admin_credential.read(
                    self.ctx.kube, self.ctx.config.namespace, instance.uid
                )
                reachable, version, recovery, refused = probe(address, admin.password)
        return decide(Observation(stopped, address, reachable, version, recovery, refused))
