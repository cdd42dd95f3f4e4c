"""replicas (ReplicasReady): spec.instances' members, one primary and streaming
replicas; a switchover when asked.

Runs only for an instance that sets spec.instances, before tls (``dbi.pipeline``). The
designated primary is the Secret ``<name>-replication``'s ``primary`` (else
``status.primary``, else the instance's VM): a switchover (``dbi.dev/switchover-
requested-at``, to ``dbi.dev/switchover-to`` or the replica that replayed most) writes
it there first (``activities.infra.replication``). One change a look, in the order of
``_changes``: the Secret; the Services; the designation; every member's boot data
(``replica`` unless designated); while another member serves as a primary it restarts
as a standby, then the designated one, caught up with each, is promoted; as the admin
on the primary the role and each member's slot; the added members' disks and VMs
(once the primary serves a certificate for ``-rw``); a member beyond the spec, its
slot, a standby's own slots. Held until every replica streams.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum

from activities.infra import addresses, manifests, members, ownership, replication, secrets
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.infra.replication import Observation, Seen
from activities.steps.loop import Anatomy
from dbi import names
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
    SWITCHOVER_STARTED = "SwitchoverStarted"
    SWITCHOVER_WAITS = "SwitchoverWaits"
    DEMOTING = "PrimaryDemoting"
    SWITCHING = "Switching"
    PROMOTED = "ReplicaPromoted"


class Kind(StrEnum):
    WRITE_SECRET = "write-secret"  # noqa: S105 (an action)
    APPLY_SERVICES = "apply-services"
    DESIGNATE = "designate"
    WRITE_BOOT = "write-boot-data"
    RESTART = "restart"
    PROMOTE = "promote"
    SET_ROLE = "set-role"
    CREATE_SLOT = "create-slot"
    CREATE_VM = "create-vm"
    APPLY_VM = "apply-vm"
    REMOVE = "remove-member"
    DROP_SLOT = "drop-slot"


@dataclass(frozen=True)
class Action:
    kind: Kind
    member: str = ""  # the member it acts on (or, for designate, the new primary)
    arg: str = ""  # a slot's name; the switchover request designate serves


Change = tuple[Reason, str, Action | None]


def decide(obs: Observation) -> Decision[Action]:
    """The one change to make, in the order the module says (pure)."""
    change = next(_changes(obs), None)
    found = _members(obs)
    primary = obs.designated if obs.settled else None
    if change is not None:
        reason, message, action = change
        if action is not None:
            return SPEC.pending(reason, message, action, after=AT_ONCE, members=found)
        return SPEC.pending(reason, message, after=5, held=True, primary=primary, members=found)
    if obs.stopped:
        return SPEC.satisfied(Reason.STOPPED, "The instance is stopped, as asked.")
    message = f"{obs.designated} is the primary; {len(obs.others)} replica(s) stream from it."
    return SPEC.satisfied(Reason.READY, message, primary=primary, members=found)


def _members(obs: Observation) -> tuple[Member, ...]:
    streaming = obs.streaming
    found = []
    for seen in obs.members:
        look = seen.look
        if seen.name == obs.designated:
            state = "Serving" if seen.primary else "Promoting"
            role, ready, lag = MemberRole.PRIMARY, seen.primary, None
        else:
            lag = streaming.get(seen.name, (None, None))[1]
            ready = seen.name in streaming
            state = "Streaming" if ready else ("Starting" if seen.vmi_uid else "Stopped")
            role = MemberRole.REPLICA
        found.append(
            Member(
                name=seen.name,
                role=role,
                ready=ready,
                state=state,
                timeline=look.timeline,
                lsn=look.lsn,
                lag_bytes=lag,
            )
        )
    return tuple(found)


def _changes(obs: Observation) -> Iterator[Change]:
    """What is still to change, in order (the first is made); no action: a wait."""
    if obs.stopped:
        yield from _stopping(obs)
        return
    if len(obs.members) > 1 and not obs.has_secret:
        message = "The replication role's password was written."
        yield Reason.SECRET_WRITTEN, message, Action(Kind.WRITE_SECRET)
    if not obs.services_ok:
        message = f"The Services -rw (to {obs.designated}), -ro and -r were applied."
        yield Reason.SERVICES_APPLIED, message, Action(Kind.APPLY_SERVICES)
    yield from _switchover(obs)
    for seen in obs.members:
        if not seen.boot_current:
            message = f"The boot data of {seen.name} was written."
            yield Reason.BOOT_DATA_WRITTEN, message, Action(Kind.WRITE_BOOT, seen.name)
    yield from _switching(obs)
    yield from _replicas(obs)
    if behind := [s.name for s in obs.others if s.name not in obs.streaming]:
        yield Reason.STARTING, f"Waiting for {', '.join(behind)} to clone and stream.", None


def _switchover(obs: Observation) -> Iterator[Change]:
    """A switchover asked for and not yet served designates its target."""
    if not obs.requested or obs.requested == obs.served or not obs.others:
        return
    if not obs.settled:
        yield Reason.SWITCHOVER_WAITS, "A switchover waits for the last one to finish.", None
        return
    streaming = obs.streaming
    if obs.target is not None and obs.target not in streaming:
        message = f"The switchover waits for {obs.target} ({names.SWITCHOVER_TO}) to stream."
        yield Reason.SWITCHOVER_WAITS, message, None
        return
    ranked = sorted(streaming, key=lambda name: (streaming[name][1] or 0, name))
    target = obs.target or (ranked[0] if ranked else None)
    if target is None:
        yield Reason.SWITCHOVER_WAITS, "The switchover waits for a replica to stream.", None
        return
    message = f"Switchover to {target}: {obs.designated} restarts as a replica."
    yield Reason.SWITCHOVER_STARTED, message, Action(Kind.DESIGNATE, target, obs.requested)


def _switching(obs: Observation) -> Iterator[Change]:
    """Until the designated member serves alone: every other primary restarts as a
    standby; then the designated one, caught up with each, is promoted."""
    in_flight = obs.designated != obs.serving or any(s.primary for s in obs.others)
    if obs.settled or not in_flight:
        return
    chosen = obs.seen(obs.designated)
    for seen in obs.others:
        if seen.primary and seen.vmi_uid:
            message = f"{seen.name} restarts as a replica of {obs.designated}."
            yield Reason.DEMOTING, message, Action(Kind.RESTART, seen.name, seen.vmi_uid)
    waiting = [s.name for s in obs.others if s.vmi_uid and not s.look.reachable]
    if waiting or not chosen.look.reachable:
        named = ", ".join(waiting or [obs.designated])
        yield Reason.SWITCHING, f"Waiting for {named} to answer as a standby.", None
        return
    ahead = [
        s.name for s in obs.others if s.look.reachable and s.look.position > chosen.look.position
    ]
    if ahead:
        message = f"Waiting for {obs.designated} to replay what {', '.join(ahead)} has."
        yield Reason.SWITCHING, message, None
        return
    message = f"{obs.designated} was promoted: it takes writes."
    yield Reason.PROMOTED, message, Action(Kind.PROMOTE, obs.designated)


def _replicas(obs: Observation) -> Iterator[Change]:
    """With the primary serving: the role, each replica's slot and VM, what goes."""
    primary = obs.seen(obs.designated)
    if not primary.primary:
        yield Reason.UNREACHABLE, f"The primary {obs.designated} does not answer the admin.", None
        return
    slots = primary.look.slots
    if obs.others and not primary.look.role_ok:
        yield Reason.ROLE_SET, "The role was set.", Action(Kind.SET_ROLE, obs.designated)
    for seen in obs.others:
        slot = members.slot(seen.name)
        if slot not in slots:
            message = f"The replication slot of {seen.name} was created."
            yield Reason.SLOT_CREATED, message, Action(Kind.CREATE_SLOT, obs.designated, slot)
        yield from _vm(seen, obs.certified)
    for m in obs.extra:
        yield Reason.MEMBER_REMOVED, f"{m} is beyond the spec: removed.", Action(Kind.REMOVE, m)
    # A removed member's slots on the primary; a former primary's on a standby.
    stale = [(obs.designated, s) for s in slots - {members.slot(m.name) for m in obs.others}]
    stale += [(m.name, s) for m in obs.others for s in m.look.slots]
    for member, slot in sorted(stale):
        message = f"The slot {slot} on {member} was dropped."
        yield Reason.SLOT_DROPPED, message, Action(Kind.DROP_SLOT, member, slot)


def _vm(seen: Seen, certified: bool) -> Iterator[Change]:
    if not seen.added:
        return
    if seen.vm is None and not certified:
        yield Reason.STARTING, "Waiting for the primary's certificate for -rw.", None
    elif seen.vm is None:
        message = f"Member {seen.name} was created; it clones the primary."
        yield Reason.MEMBER_CREATED, message, Action(Kind.CREATE_VM, seen.name)
    elif not manifests.covers(seen.desired, seen.vm):
        message = f"Member {seen.name}'s VM drifted and was corrected."
        yield Reason.MEMBER_UPDATED, message, Action(Kind.APPLY_VM, seen.name)


def _stopping(obs: Observation) -> Iterator[Change]:
    for s in obs.members:
        if s.vm is not None and not manifests.covers(s.desired, s.vm):
            yield (
                Reason.MEMBER_UPDATED,
                f"Member {s.name} was stopped.",
                Action(Kind.APPLY_VM, s.name),
            )


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    kube, ns = ctx.kube, instance.namespace
    added = {
        m: kube.get_custom(*KUBEVIRT, ns, "virtualmachines", m)
        for m in members.added(instance, up_to=5)
    }
    secret = secrets.read(kube, ns, members.replication_secret(instance))
    designated = secret.data.get(replication.PRIMARY) or addresses.primary_of(instance)
    wanted = [instance.name, *members.added(instance)]
    if designated not in wanted:  # the primary is never removed
        wanted.append(designated)
    children = [
        ownership.Child("VirtualMachine", m, ownership.meta_of(vm, kube)) for m, vm in added.items()
    ]
    services = {s["metadata"]["name"]: s for s in members.services(instance, designated)}
    found = {name: kube.service(ns, name) for name in services}
    children += [
        ownership.Child("Service", n, ownership.meta_of(s, kube)) for n, s in found.items()
    ]
    common = {
        "designated": designated,
        "serving": addresses.primary_of(instance),
        "services_ok": all(
            svc is not None and manifests.covers(services[n]["spec"], svc.get("spec"))
            for n, svc in found.items()
        ),
        "extra": tuple(m for m, vm in added.items() if vm is not None and m not in wanted),
        "children": tuple(children),
    }
    if instance.model.spec.power_state is PowerState.STOPPED:
        stopping = tuple(
            Seen(
                name=m,
                vm=added[m],
                desired=replication.member_vm(ctx, instance, m, added[m], replica=m != designated),
            )
            for m in wanted
            if m in added
        )
        return Observation(stopped=True, members=stopping, **common)  # type: ignore[arg-type]
    sources = replication.sources(ctx, instance)
    seen = tuple(_seen(ctx, instance, m, added.get(m), designated, sources) for m in wanted)
    annotations = instance.annotations
    primary = addresses.address_of(addresses.vmi_of(kube, instance, designated))
    return Observation(
        certified=all(s.vm or not s.added for s in seen)
        or replication.certified(ctx, instance, primary),
        has_secret=bool(secret.data.get(replication.PASSWORD)),
        requested=step_input.switchover_requested,
        served=secret.data.get(replication.SERVED),
        target=annotations.get(names.SWITCHOVER_TO) or None,
        members=seen,
        **common,  # type: ignore[arg-type]
    )


def _seen(
    ctx: Context,
    instance: Instance,
    m: str,
    vm: Manifest | None,
    designated: str,
    sources: replication.Sources | None,
) -> Seen:
    kube, ns = ctx.kube, instance.namespace
    current = secrets.boot_data(secrets.read(kube, ns, f"{m}-cloudinit"))
    wanted = None
    if sources is not None:
        wanted = replication.document(instance, sources, m, replica=m != designated)
    vmi = addresses.vmi_of(kube, instance, m)
    added = m != instance.name
    password = sources.password if sources is not None else ""
    look = replication.look(ctx, instance, addresses.address_of(vmi), password)
    return Seen(
        name=m,
        vm=vm,
        desired=replication.member_vm(ctx, instance, m, vm, replica=m != designated)
        if added
        else None,
        added=added,
        boot_current=replication.same(current, wanted),
        vmi_uid=((vmi or {}).get("metadata") or {}).get("uid"),
        look=look,
    )


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    member, kind = action.member, action.kind
    if kind is Kind.WRITE_SECRET:
        replication.write_secret(ctx, instance)
    elif kind is Kind.APPLY_SERVICES:
        replication.apply_services(ctx, instance, obs.designated)
    elif kind is Kind.DESIGNATE:
        replication.designate(ctx, instance, member, action.arg)
    elif kind is Kind.WRITE_BOOT:
        replication.write_boot(ctx, instance, member, replica=member != obs.designated)
    elif kind is Kind.RESTART:
        replication.restart(ctx, instance, member, action.arg)
    elif kind in (Kind.CREATE_VM, Kind.APPLY_VM):
        create, replica = kind is Kind.CREATE_VM, member != obs.designated
        vm = obs.seen(member).vm
        replication.apply_vm(ctx, instance, member, vm, create=create, replica=replica)
    elif kind is Kind.REMOVE:
        replication.remove(ctx, instance, member)
    else:
        replication.on_member(ctx, instance, member, kind.value, action.arg)


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
