"""replicas (ReplicasReady): spec.instances' replica members, cloned and streaming.

Runs only for an instance that sets spec.instances (``workflows.passes``). In order, one
change a look: the Secret ``<name>-replication`` with the replication role's password;
the Services ``<name>-rw``, ``<name>-ro`` and ``<name>-r`` (``activities.infra.members``);
as the admin on the primary, the role ``dbi_replication`` (LOGIN REPLICATION, its
password's SCRAM verifier) and each replica's physical slot; each replica's boot data
(the primary's document with ``replica``), disks and VM; then what the spec no longer
wants goes: a member beyond spec.instances (VM, disks, boot data), then its slot. Each
replica clones the primary at its first boot and streams (``guest.replica``); the step
is Pending until every replica shows in the primary's ``pg_stat_replication`` as
streaming. It publishes ``status.primary`` and ``status.members``. A stopped instance
stops its replicas too. Idempotency key: the members' names.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum

import psycopg

from activities.infra import (
    addresses,
    admin_credential,
    manifests,
    members,
    ownership,
    postgres,
    replication,
    secrets,
    trust,
)
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.steps.loop import Anatomy
from dbi import bootstrap, names, scram
from dbi.models import Member, MemberRole
from dbi.pipeline import REPLICAS as SPEC
from dbi.spec import PowerState
from dbi.steps import AT_ONCE, Common, Decision, StepInput


class Reason(StrEnum):
    READY = SPEC.condition_type
    STOPPED = Common.STOPPED
    SECRET_WRITTEN = "ReplicationSecretWritten"  # noqa: S105 (a reason)
    SERVICES_APPLIED = "ServicesApplied"
    UNREACHABLE = "PrimaryUnreachable"
    ROLE_SET = "ReplicationRoleSet"
    SLOT_CREATED = "SlotCreated"
    BOOT_DATA_WRITTEN = "MemberBootDataWritten"
    MEMBER_CREATED = "MemberCreated"
    MEMBER_UPDATED = "MemberUpdated"
    MEMBER_REMOVED = "MemberRemoved"
    SLOT_DROPPED = "SlotDropped"
    STARTING = "MembersStarting"


class Kind(StrEnum):
    WRITE_SECRET = "write-secret"  # noqa: S105 (an action)
    APPLY_SERVICES = "apply-services"
    SET_ROLE = "set-role"
    CREATE_SLOT = "create-slot"
    WRITE_BOOT = "write-boot-data"
    CREATE_VM = "create-vm"
    APPLY_VM = "apply-vm"
    REMOVE = "remove-member"
    DROP_SLOT = "drop-slot"


@dataclass(frozen=True)
class Action:
    kind: Kind
    member: str = ""


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One replica member as observed: its VM, and whether its boot data is current."""

    name: str
    vm: Manifest | None = None
    desired: Manifest | None = None
    boot_current: bool = False
    running: bool = False


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool = False
    has_secret: bool = False
    services_ok: bool = False
    reachable: bool = False
    role_ok: bool = False
    slots: frozenset[str] = frozenset()
    wanted: tuple[Seen, ...] = ()
    extra: tuple[str, ...] = ()  # members beyond spec.instances that still exist
    streaming: dict[str, tuple[str, int | None]] = field(default_factory=dict)  # lsn, lag
    primary: Member | None = None
    children: tuple[ownership.Child, ...] = ()


def _members(obs: Observation) -> tuple[Member, ...]:
    found = [obs.primary] if obs.primary is not None else []
    for seen in obs.wanted:
        lsn, lag = obs.streaming.get(seen.name, (None, None))
        state = "Streaming" if lsn else ("Starting" if seen.running else "Stopped")
        ready = lsn is not None
        found.append(
            Member(
                name=seen.name,
                role=MemberRole.REPLICA,
                ready=ready,
                state=state,
                lsn=lsn,
                lag_bytes=lag,
            )
        )
    return tuple(found)


def decide(obs: Observation) -> Decision[Action]:
    """The one change to make, in the order the module says (pure)."""
    primary, found = obs.primary.name if obs.primary else None, _members(obs)
    change = next(_changes(obs), None)
    if change is not None:
        reason, message, action = change
        return SPEC.pending(reason, message, action, after=AT_ONCE if action else 5)
    if obs.stopped:
        return SPEC.satisfied(Reason.STOPPED, "The instance is stopped, as asked.")
    behind = [s.name for s in obs.wanted if s.name not in obs.streaming]
    if behind:
        message = f"Waiting for {', '.join(behind)} to clone the primary and stream."
        return SPEC.pending(Reason.STARTING, message, after=5, primary=primary, members=found)
    message = f"{len(obs.wanted)} replica(s) stream from the primary."
    return SPEC.satisfied(Reason.READY, message, primary=primary, members=found)


Change = tuple[Reason, str, Action | None]


def _changes(obs: Observation) -> Iterator[Change]:
    """What is still to change, in order (the first is made); None: a wait."""
    if obs.stopped:
        yield from _stopping(obs)
        return
    if obs.wanted and not obs.has_secret:
        message = "The replication role's password was written."
        yield Reason.SECRET_WRITTEN, message, Action(Kind.WRITE_SECRET)
    if not obs.services_ok:
        message = "The Services -rw, -ro and -r were applied."
        yield Reason.SERVICES_APPLIED, message, Action(Kind.APPLY_SERVICES)
    if not obs.reachable:
        yield Reason.UNREACHABLE, "The primary does not answer the admin.", None
    if obs.wanted and not obs.role_ok:
        message = "The replication role was set on the primary."
        yield Reason.ROLE_SET, message, Action(Kind.SET_ROLE)
    for seen in obs.wanted:
        yield from _member_changes(obs, seen)
    for member in obs.extra:
        message = f"Member {member} is beyond spec.instances and was removed."
        yield Reason.MEMBER_REMOVED, message, Action(Kind.REMOVE, member)
    for slot in sorted(obs.slots - {members.slot(s.name) for s in obs.wanted}):
        message = f"The slot {slot} of a removed member was dropped."
        yield Reason.SLOT_DROPPED, message, Action(Kind.DROP_SLOT, slot)


def _stopping(obs: Observation) -> Iterator[Change]:
    for seen in obs.wanted:
        if seen.vm is not None and not manifests.covers(seen.desired, seen.vm):
            message = f"Replica {seen.name} was stopped with the instance."
            yield Reason.MEMBER_UPDATED, message, Action(Kind.APPLY_VM, seen.name)


def _member_changes(obs: Observation, seen: Seen) -> Iterator[Change]:
    if members.slot(seen.name) not in obs.slots:
        message = f"The replication slot of {seen.name} was created."
        yield Reason.SLOT_CREATED, message, Action(Kind.CREATE_SLOT, seen.name)
    if not seen.boot_current:
        message = f"The boot data of {seen.name} was written."
        yield Reason.BOOT_DATA_WRITTEN, message, Action(Kind.WRITE_BOOT, seen.name)
    if seen.vm is None:
        message = f"Replica {seen.name} was created; it clones the primary."
        yield Reason.MEMBER_CREATED, message, Action(Kind.CREATE_VM, seen.name)
    elif not manifests.covers(seen.desired, seen.vm):
        message = f"Replica {seen.name}'s VM drifted and was corrected."
        yield Reason.MEMBER_UPDATED, message, Action(Kind.APPLY_VM, seen.name)


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube, ns = ctx.kube, instance.namespace
    vms = {
        m: kube.get_custom(*KUBEVIRT, ns, "virtualmachines", m)
        for m in members.replicas(instance, up_to=5)
    }
    wanted_names = members.replicas(instance)
    children = [
        ownership.Child("VirtualMachine", m, ownership.meta_of(vm, kube)) for m, vm in vms.items()
    ]
    extra = tuple(m for m, vm in vms.items() if vm is not None and m not in wanted_names)
    services = {s["metadata"]["name"]: s for s in members.services(instance)}
    found = {name: kube.service(ns, name) for name in services}
    children += [
        ownership.Child("Service", n, ownership.meta_of(s, kube)) for n, s in found.items()
    ]
    services_ok = all(
        svc is not None and manifests.covers(services[n]["spec"], svc.get("spec"))
        for n, svc in found.items()
    )
    stopped = instance.model.spec.power_state is PowerState.STOPPED
    if stopped:
        wanted = tuple(
            Seen(name=m, vm=vms[m], desired=replication.member_vm(ctx, instance, m, vms[m]))
            for m in wanted_names
        )
        return Observation(stopped=True, wanted=wanted, children=tuple(children))
    password = secrets.read(kube, ns, members.replication_secret(instance)).password
    boot = secrets.boot_data(secrets.read_boot(kube, instance))
    primary_svc = kube.service(ns, instance.name)
    hostaddr = ((primary_svc or {}).get("spec") or {}).get("clusterIP") or ""
    ca = trust.recent_ca(kube, ctx.config.namespace, ns)
    seen: list[Seen] = []
    for m in wanted_names:
        current = secrets.boot_data(secrets.read(kube, ns, f"{m}-cloudinit"))
        desired_doc = None
        if boot is not None and password and hostaddr and ca is not None:
            desired_doc = replication.document(instance, boot, hostaddr, password, ca.cert_pem, m)
        vmi = kube.get_custom(*KUBEVIRT, ns, "virtualmachineinstances", m)
        seen.append(
            Seen(
                name=m,
                vm=vms[m],
                desired=replication.member_vm(ctx, instance, m, vms[m]),
                boot_current=replication.same(current, desired_doc),
                running=addresses.address_of(vmi) is not None,
            )
        )
    looked = _look_at_primary(ctx, instance, password)
    return replace(
        looked,
        has_secret=bool(password),
        services_ok=services_ok,
        wanted=tuple(seen),
        extra=extra,
        children=tuple(children),
    )


def _same(current: bootstrap.Bootstrap | None, desired: bootstrap.Bootstrap | None) -> bool:
    """Whether the boot data read is the one wanted, as the guest reads it (the version
    written is the one the fields need)."""
    if current is None or desired is None:
        return False
    return bootstrap.to_document(current) == bootstrap.to_document(desired)


def _look_at_primary(ctx: Context, instance: Instance, password: str) -> Observation:
    """As the admin on the primary: the role, the slots, who streams, where it writes."""
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None:
        return Observation()
    admin = admin_credential.read(ctx.kube, ctx.config.namespace, instance.uid).password
    try:
        with postgres.connect(
            trust.server(ctx.kube, ctx.config.namespace, instance, address), password=admin
        ) as conn:
            stored = conn.execute(
                "SELECT rolpassword FROM pg_authid"
                " WHERE rolname = %s AND rolreplication AND rolcanlogin",
                (names.REPLICATION_USER,),
            ).fetchone()
            slots = conn.execute(
                "SELECT slot_name FROM pg_replication_slots"
                " WHERE slot_type = 'physical' AND slot_name LIKE %s",
                (members.slot(instance.name) + r"\_%",),
            ).fetchall()
            streaming = conn.execute(
                "SELECT application_name, replay_lsn::text,"
                " pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint"
                " FROM pg_stat_replication WHERE state = 'streaming' AND replay_lsn IS NOT NULL"
            ).fetchall()
            lsn, timeline = conn.execute(
                "SELECT pg_current_wal_lsn()::text, timeline_id FROM pg_control_checkpoint()"
            ).fetchone() or (None, None)
    except psycopg.OperationalError:
        return Observation()
    role_ok = stored is not None and bool(password) and scram.verifies(password, stored[0] or "")
    primary = Member(
        name=members.primary(instance),
        role=MemberRole.PRIMARY,
        ready=True,
        state="Serving",
        timeline=timeline,
        lsn=lsn,
    )
    return Observation(
        reachable=True,
        role_ok=role_ok,
        slots=frozenset(row[0] for row in slots),
        streaming={row[0]: (row[1], row[2]) for row in streaming},
        primary=primary,
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    member, kind = action.member, action.kind
    if kind is Kind.WRITE_SECRET:
        replication.write_secret(ctx, instance)
    elif kind is Kind.APPLY_SERVICES:
        replication.apply_services(ctx, instance)
    elif kind is Kind.WRITE_BOOT:
        replication.write_boot(ctx, instance, member)
    elif kind in (Kind.CREATE_VM, Kind.APPLY_VM):
        observed = next(s.vm for s in obs.wanted if s.name == member)
        replication.apply_vm(ctx, instance, member, observed, create=kind is Kind.CREATE_VM)
    elif kind is Kind.REMOVE:
        replication.remove(ctx, instance, member)
    else:
        replication.on_primary(ctx, instance, kind.value, member)


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
