"""The major upgrade workflow's activities (``dbi.upgrades`` tells the sequence).

Each observes before it acts, so a retry after a lost worker finds what was done and
goes on: ``run_upgrade`` writes the boot data's instruction only if it is not there,
points the VM at the new root disk only if it does not, and restarts the VM only if its
running VMI booted another root disk; then it waits, heartbeating, for the guest's
report (``dbi.bootstrap.UPGRADE_REPORT``) with this upgrade's token. The guest keeps the
old data directory until ``finish_upgrade`` runs the ``delete_old_cluster.sh`` that
pg_upgrade wrote beside it (through the server, as its OS user: ``COPY ... TO
PROGRAM``, dbi's admin being the superuser): the point of no return. Until then
``rollback_upgrade`` boots the old root disk and the old data again.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

import psycopg
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.infra import (
    addresses,
    admin_credential,
    bootdata,
    heartbeats,
    machine,
    manifests,
    postgres,
    trust,
)
from activities.infra.context import Activity
from activities.infra.events import emit
from activities.infra.kube import KUBEVIRT, Instance
from activities.infra.machine import image_for
from activities.infra.postgres import major
from activities.steps.loop import INSTANCE_GONE
from dbi import bootstrap, names, pipeline
from dbi.spec import PowerState
from dbi.status import Event
from dbi.upgrades import Plan, Ran, UpgradeRequest

LOOK_SECONDS = 2.0
NOT_RUNNING = "NotRunning"
OLD_ROOT_GONE = "OldRootDiskGone"


class Upgrades(Activity):
    """The five activities of DBUpgradeWorkflow, sharing what they look at."""

    @activity.defn(name=pipeline.BEGIN_UPGRADE)
    def begin(self, request: UpgradeRequest) -> Plan:
        """Check the instance can be upgraded now, and make the new major's root disk."""
        instance = self._instance(request)
        if instance is None:
            return Plan(reason=INSTANCE_GONE, message="The instance is gone.")
        if instance.model.spec.power_state is PowerState.STOPPED:
            message = "The instance is stopped; start it to upgrade it."
            return Plan(reason=NOT_RUNNING, message=message)
        image = image_for(instance, self.ctx.config.images) or ""
        observed = self.ctx.kube.get_custom(
            *KUBEVIRT, instance.namespace, "virtualmachines", instance.name
        )
        new_root = manifests.root_claim_name(instance.name, image)
        roots = self.ctx.kube.pvcs(
            instance.namespace,
            {names.INSTANCE_LABEL: instance.name, manifests.DISK_LABEL: manifests.ROOT},
        )
        old = old_root(
            booted=manifests.root_of(observed),
            new_root=new_root,
            roots={
                str(c.metadata.name): (c.metadata.annotations or {}).get(manifests.IMAGE_ANNOTATION)
                for c in roots
                if c.metadata is not None
            },
            old_image=self.ctx.config.images.get(request.from_major),
        )
        if old is None:
            message = (
                "The old major's root disk is gone, so an upgrade could not be rolled back; "
                "nothing was started. Take a backup (dbi backup NAME) and restore it into a "
                "new instance of the new major instead."
            )
            return Plan(reason=OLD_ROOT_GONE, message=message)
        plan = Plan(new_root=new_root, old_root=old, new_image=image)
        if self.ctx.kube.pvc(instance.namespace, plan.new_root) is None:
            machine.create_root(self.ctx, instance, image)
        _event(
            self.ctx,
            instance,
            "UpgradeStarted",
            f"Major upgrade to PostgreSQL {request.to_major} started: {image}, "
            f"pg_upgrade --check, then pg_upgrade; the old data stays until the new answers.",
        )
        return plan

    def _instance(self, request: UpgradeRequest) -> Instance | None:
        instance = self.ctx.kube.instance(request.namespace, request.name)
        if instance is None or instance.uid != request.uid or instance.deleting:
            return None
        return instance

    def _as_admin(self, instance: Instance, address: str) -> tuple[postgres.Server, str]:
        """Where the instance's server is, trusted, and dbi's admin password for it."""
        ctx = self.ctx
        server = trust.server(ctx.kube, ctx.config.namespace, instance, address)
        return server, admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid).password

    @activity.defn(name=pipeline.RUN_UPGRADE)
    def run(self, request: UpgradeRequest, plan: Plan) -> Ran:
        """Boot the new root disk with the upgrade's instruction; wait for the report."""
        return self._boot(request, plan.new_root, "run")

    def _boot(self, request: UpgradeRequest, root: str, action: str) -> Ran:
        instance = self._instance(request)
        if instance is None:
            raise ApplicationError("The instance is gone.", type=INSTANCE_GONE, non_retryable=True)
        token = activity.info().workflow_id or ""
        bootdata.instruct_upgrade(
            self.ctx.kube,
            instance,
            bootstrap.Upgrade(
                from_major=request.from_major,
                to_major=request.to_major,
                token=token,
                action="rollback" if action == "rollback" else "run",
            ),
        )
        machine.boot_root(self.ctx, instance, root)
        vmi = addresses.vmi_of(self.ctx.kube, instance)
        if vmi is not None and manifests.claim_of(vmi.get("spec") or {}, manifests.ROOT) != root:
            self.ctx.kube.delete("VirtualMachineInstance", instance.namespace, instance.name)
        # Where the boot ends: the new major (an upgrade), the old one (a rollback).
        goal = request.to_major if action == "run" else request.from_major
        while True:
            failing = boot_failure(
                self.ctx.kube.get_custom(
                    *KUBEVIRT, instance.namespace, "virtualmachines", instance.name
                ),
                root,
            )
            if failing is not None:
                return Ran(ok=False, phase="boot", output=failing)
            seen = self._report(instance, root)
            if seen is not None:
                found, version = seen
                if found.get("token") == token:
                    return Ran(
                        ok=bool(found.get("ok")) and action == "run",
                        phase=str(found.get("phase") or ""),
                        output=str(found.get("output") or "")[:2000],
                        version=version,
                    )
                if action == "run" and major(version) == goal:
                    # An earlier attempt's boot upgraded it (its finish failed, say).
                    return Ran(ok=True, phase="upgraded", version=version)
            activity.heartbeat(f"waiting for the guest's {action} report")
            time.sleep(LOOK_SECONDS)

    def _report(self, instance: Instance, root: str) -> tuple[dict[str, Any], str] | None:
        """The guest's report ({} if none) and the server's version, once a VMI booted
        from ``root`` answers."""
        vmi = addresses.vmi_of(self.ctx.kube, instance)
        address = addresses.address_of(vmi)
        on_root = manifests.claim_of((vmi or {}).get("spec") or {}, manifests.ROOT) == root
        if address is None or not on_root:
            return None
        server, password = self._as_admin(instance, address)
        try:
            with postgres.connect(server, password=password) as conn:
                row = conn.execute(
                    "SELECT pg_read_file(%s, 0, 100000, true), current_setting('server_version')",
                    (bootstrap.UPGRADE_REPORT,),
                ).fetchone()
        except psycopg.Error as e:
            activity.logger.info("upgrade report not readable yet: %s", type(e).__name__)
            return None
        if row is None:
            return None
        try:
            found = json.loads(row[0] or "{}")
        except ValueError:
            found = {}
        return (found if isinstance(found, dict) else {}), str(row[1])

    @activity.defn(name=pipeline.ROLLBACK_UPGRADE)
    def rollback(self, request: UpgradeRequest, plan: Plan) -> Ran:
        """Boot the old root disk and the old data again; clear the instruction."""
        ran = self._boot(request, plan.old_root, "rollback")
        instance = self._instance(request)
        if instance is not None:
            bootdata.instruct_upgrade(self.ctx.kube, instance, None)
            _event(
                self.ctx,
                instance,
                "UpgradeRolledBack",
                f"The upgrade to PostgreSQL {request.to_major} was rolled back: the old data "
                f"runs on its old root disk, PostgreSQL {ran.version}.",
                kind="Warning",
            )
        return ran

    @activity.defn(name=pipeline.VERIFY_UPGRADE)
    def verify(self, request: UpgradeRequest, plan: Plan) -> Ran:
        """The new server answers as the admin, is of the new major, and has planner
        statistics again (pg_upgrade does not carry them): ANALYZE in every database."""
        instance = self._instance(request)
        if instance is None:
            return Ran(ok=False, phase="verify", output="The instance is gone.")
        address = addresses.address_of(addresses.vmi_of(self.ctx.kube, instance))
        if address is None:
            return Ran(ok=False, phase="verify", output="The VM has no address.")
        server, password = self._as_admin(instance, address)
        try:
            with postgres.connect(server, password=password) as conn:
                version = _server_version(conn)
                databases = [
                    str(r[0])
                    for r in conn.execute(
                        "SELECT datname FROM pg_database WHERE datallowconn ORDER BY datname"
                    ).fetchall()
                ]
            if major(version) != request.to_major:
                said = f"PostgreSQL {version} answers, not {request.to_major}."
                return Ran(ok=False, phase="verify", output=said, version=version)
            for database in databases:
                with postgres.connect(
                    server, password=password, dbname=database, unbounded=True
                ) as db:
                    db.execute("SET statement_timeout = 0")
                    # As long as it takes: heartbeating meanwhile, or Temporal takes the
                    # attempt for lost and starts another while this one still runs.
                    heartbeats.working(f"ANALYZE {database}", partial(db.execute, "ANALYZE"))
        except psycopg.Error as e:
            said = f"The new server does not answer as it should ({type(e).__name__})."
            return Ran(ok=False, phase="verify", output=said)
        return Ran(ok=True, phase="verified", version=version)

    @activity.defn(name=pipeline.FINISH_UPGRADE)
    def finish(self, request: UpgradeRequest, plan: Plan) -> str:
        """The point of no return: record the data's new major on the data disk, clear
        the boot data's instruction, then remove the old data (pg_upgrade's own script).
        An old data directory that cannot be removed is kept, with a Warning Event."""
        instance = self._instance(request)
        if instance is None:
            raise ApplicationError("The instance is gone.", type=INSTANCE_GONE, non_retryable=True)
        address = addresses.address_of(addresses.vmi_of(self.ctx.kube, instance))
        if address is None:
            raise ApplicationError("The VM has no address yet.")
        server, password = self._as_admin(instance, address)
        with postgres.connect(server, password=password) as conn:
            version = _server_version(conn)
        if major(version) != request.to_major:
            raise ApplicationError(
                f"PostgreSQL {version} answers, not {request.to_major}: the old data stays.",
                non_retryable=True,
            )
        self.ctx.kube.patch(
            "PersistentVolumeClaim",
            instance.namespace,
            manifests.data_claim_name(instance),
            {"metadata": {"annotations": {names.DATA_MAJOR_ANNOTATION: str(request.to_major)}}},
        )
        bootdata.instruct_upgrade(self.ctx.kube, instance, None)
        script = f"../{bootstrap.DELETE_OLD_CLUSTER}"
        try:
            with postgres.connect(server, password=password) as conn:
                conn.execute(
                    f"COPY (SELECT 1) TO PROGRAM "
                    f"'test ! -f {script} || (sh {script} && rm -f {script})'"
                )
        except psycopg.Error as e:
            _event(
                self.ctx,
                instance,
                "OldDataKept",
                f"PostgreSQL {version} runs the data, but the old data directory could not be "
                f"removed ({type(e).__name__}): delete_old_cluster.sh beside the data directory "
                "removes it.",
                kind="Warning",
            )
            return version
        _event(
            self.ctx,
            instance,
            "Upgraded",
            f"PostgreSQL {version} runs the data; the old data directory was removed.",
        )
        return version


# What KubeVirt's printableStatus says of a VM that does not come up.
NOT_BOOTING = frozenset({"CrashLoopBackOff", "ErrorUnschedulable", "ErrorPvcNotFound"})


def boot_failure(vm: dict[str, Any] | None, root: str) -> str | None:
    """Why the VM, pointed at ``root``, does not boot on it (its printableStatus says
    so); None while it may (pure)."""
    status = ((vm or {}).get("status") or {}).get("printableStatus")
    if manifests.root_of(vm) != root or status not in NOT_BOOTING:
        return None
    return f"The VM does not boot on the root disk {root}: {status}."


def old_root(
    *, booted: str | None, new_root: str, roots: dict[str, str | None], old_image: str | None
) -> str | None:
    """The root disk the old data boots on (pure): the one the VM boots unless that is
    already the new one (an earlier attempt switched it), else the instance's other
    root disk, the old major's image's when there are several; None: none is left."""
    if booted and booted != new_root:
        return booted
    others = sorted(name for name in roots if name != new_root)
    if len(others) == 1:
        return others[0]
    of_old = [name for name in others if old_image is not None and roots[name] == old_image]
    return of_old[0] if of_old else None


def _server_version(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SHOW server_version").fetchone()
    assert row is not None
    return str(row[0])


def _event(ctx: Any, instance: Instance, reason: str, message: str, kind: str = "Normal") -> None:
    emit(ctx.kube, instance, Event(type=kind, reason=reason, message=message), _now())


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)
