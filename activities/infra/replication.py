"""What the replicas step (``activities.steps.replicas``) reads and changes: the Secret
``<name>-replication`` (the role's password, the designated primary and the switchover
request it serves), each member's PostgreSQL as the admin sees it, the members' boot
data, disks and VMs, the Services, and what a member beyond spec.instances leaves.

The designated primary is written in the Secret before anything else of a switchover
changes: every later look reads the decision there, so a worker that dies anywhere in
the middle leaves the next one the same switchover to finish.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from kubernetes import client as k8s
from psycopg import sql

from activities.infra import (
    addresses,
    admin_credential,
    manifests,
    members,
    postgres,
    secrets,
    trust,
)
from activities.infra.context import Context
from activities.infra.kube import KUBEVIRT, Instance, Manifest
from activities.infra.machine import desired_strategy, image_for, image_storage_class
from activities.infra.ownership import Child
from dbi import bootstrap, names, scram, tls

PASSWORD, PRIMARY, SERVED = "password", "primary", "switchover"


@dataclass(frozen=True, kw_only=True)
class Look:
    """One member's PostgreSQL, as the admin sees it over verified TLS."""

    reachable: bool = False
    in_recovery: bool = False
    lsn: str | None = None  # written (a primary) or replayed (a standby)
    position: int = 0  # lsn in bytes, to compare
    timeline: int | None = None
    slots: frozenset[str] = frozenset()  # dbi's physical slots on it
    role_ok: bool = False  # dbi_replication logs in with the Secret's password
    # A primary's pg_stat_replication: application_name -> (replay lsn, lag in bytes).
    streaming: tuple[tuple[str, str, int | None], ...] = ()


@dataclass(frozen=True, kw_only=True)
class Seen:
    """One member as observed: its VM (an added member's), boot data, VMI, server."""

    name: str
    vm: Manifest | None = None  # an added member's VM (None: the instance's, or none)
    desired: Manifest | None = None
    added: bool = True
    boot_current: bool = False
    vmi_uid: str | None = None
    look: Look = field(default_factory=Look)

    @property
    def primary(self) -> bool:
        return self.look.reachable and not self.look.in_recovery


@dataclass(frozen=True, kw_only=True)
class Observation:
    stopped: bool = False
    has_secret: bool = False
    designated: str = ""  # the member that is to take writes
    serving: str = ""  # status.primary: the one that took writes at the last look
    requested: str | None = None  # an unserved dbi.dev/switchover-requested-at
    served: str | None = None  # the request the last designation served
    target: str | None = None  # dbi.dev/switchover-to
    services_ok: bool = False
    members: tuple[Seen, ...] = ()  # the instance's own VM first
    extra: tuple[str, ...] = ()  # added members beyond spec.instances that still exist
    children: tuple[Child, ...] = ()
    # The primary serves a certificate for every member Service (<name>-rw too): a clone
    # before it would fail verify-full and leave the member down.
    certified: bool = True

    def seen(self, name: str) -> Seen:
        return next((s for s in self.members if s.name == name), Seen(name=name))

    @property
    def others(self) -> tuple[Seen, ...]:
        return tuple(s for s in self.members if s.name != self.designated)

    @property
    def settled(self) -> bool:
        """The designated member serves as the primary, and no other does."""
        return self.seen(self.designated).primary and not any(s.primary for s in self.others)

    @property
    def streaming(self) -> dict[str, tuple[str, int | None]]:
        found = self.seen(self.designated).look.streaming
        return {name: (lsn, lag) for name, lsn, lag in found}


def look(ctx: Context, instance: Instance, address: str | None, password: str) -> Look:
    """What the member at ``address`` says (the role judged against ``password``, the
    Secret's); unreachable when it does not answer."""
    if address is None:
        return Look()
    home = ctx.config.namespace
    admin = admin_credential.read(ctx.kube, home, instance.uid).password
    try:
        with postgres.connect(trust.server(ctx.kube, home, instance, address), password=admin) as c:
            in_recovery, lsn, position = c.execute(
                "SELECT pg_is_in_recovery(), lsn::text, pg_wal_lsn_diff(lsn, '0/0')::bigint"
                " FROM (SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
                " ELSE pg_current_wal_lsn() END AS lsn) AS l"
            ).fetchone() or (False, None, 0)
            timeline = (
                c.execute("SELECT timeline_id FROM pg_control_checkpoint()").fetchone() or [None]
            )[0]
            slots = c.execute(
                "SELECT slot_name FROM pg_replication_slots"
                " WHERE slot_type = 'physical' AND slot_name LIKE 'dbi\\_%'"
            ).fetchall()
            stored = c.execute(
                "SELECT rolpassword FROM pg_authid"
                " WHERE rolname = %s AND rolreplication AND rolcanlogin",
                (names.REPLICATION_USER,),
            ).fetchone()
            streaming = c.execute(
                "SELECT application_name, replay_lsn::text,"
                " pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint"
                " FROM pg_stat_replication WHERE state = 'streaming' AND replay_lsn IS NOT NULL"
                " AND NOT pg_is_in_recovery()"
            ).fetchall()
    except psycopg.OperationalError:
        return Look()
    return Look(
        reachable=True,
        in_recovery=bool(in_recovery),
        lsn=lsn,
        position=int(position or 0),
        timeline=timeline,
        slots=frozenset(row[0] for row in slots),
        role_ok=bool(password) and stored is not None and scram.verifies(password, stored[0] or ""),
        streaming=tuple((row[0], row[1], row[2]) for row in streaming),
    )


def certified(ctx: Context, instance: Instance, address: str | None) -> bool:
    """Whether the server at ``address`` presents the namespace CA's certificate for
    every name ``members.certificate_names`` lists."""
    ca = trust.recent_ca(ctx.kube, ctx.config.namespace, instance.namespace)
    served = trust.served(address) if address else None
    if ca is None or served is None or served.der is None:
        return False
    return tls.judge(served.der, ca.cert_pem, members.certificate_names(instance)).trusted


def member_vm(
    ctx: Context, instance: Instance, member: str, observed: Manifest | None, *, replica: bool
) -> Manifest:
    """An added member's VM to apply: the spec's size and power, its root disk as
    observed, labelled a replica's unless it is the primary."""
    root = manifests.root_of(observed) or manifests.root_claim_name(
        member, image_for(instance, ctx.config.images) or ""
    )
    vm = manifests.vm(
        instance,
        run_strategy=desired_strategy(instance),
        root_claim=root,
        member=member,
        replica=replica,
    )
    if observed is not None:  # hot-plug limits as booted (manifests.vm)
        domain = vm["spec"]["template"]["spec"]["domain"]
        booted = observed["spec"]["template"]["spec"]["domain"]
        domain["cpu"]["maxSockets"] = booted.get("cpu", {}).get("maxSockets")
        domain["memory"]["maxGuest"] = booted.get("memory", {}).get("maxGuest")
    return vm


def same(current: bootstrap.Bootstrap | None, desired: bootstrap.Bootstrap | None) -> bool:
    """Whether the boot data read is the one wanted, as the guest reads it (the version
    written is the one the fields need)."""
    if current is None or desired is None:
        return False
    return bootstrap.to_document(current) == bootstrap.to_document(desired)


@dataclass(frozen=True)
class Sources:
    """What every member's boot data is made from."""

    boot: bootstrap.Bootstrap  # the instance's own (<name>-cloudinit)
    password: str
    hostaddr: str  # the Service <name>-rw's ClusterIP
    ca_pem: str

    def __repr__(self) -> str:
        return f"Sources(hostaddr={self.hostaddr!r})"


def sources(ctx: Context, instance: Instance) -> Sources | None:
    """None until the instance has boot data, the password, -rw's ClusterIP and a CA."""
    kube, ns = ctx.kube, instance.namespace
    boot = secrets.boot_data(secrets.read_boot(kube, instance))
    password = secrets.read(kube, ns, members.replication_secret(instance)).data.get(PASSWORD, "")
    svc = kube.service(ns, instance.name + names.RW_SUFFIX) or {}
    hostaddr = (svc.get("spec") or {}).get("clusterIP") or ""
    ca = trust.recent_ca(kube, ctx.config.namespace, ns)
    if boot is None or ca is None or not password or not hostaddr:
        return None
    return Sources(boot, password, hostaddr, ca.cert_pem)


def document(
    instance: Instance, found: Sources, member: str, *, replica: bool
) -> bootstrap.Bootstrap:
    """``member``'s boot data: the instance's, with ``replica`` unless it is the primary
    (an added member's has no reset, restore or upgrade either)."""
    if member == instance.name:
        base = found.boot
    else:  # keywords: "upgrade" is a step's name too
        base = found.boot.model_copy(update=dict(reset=None, restore=None, upgrade=None))
    if not replica:
        return base.model_copy(update=dict(replica=None))
    host = names.service_host(instance.namespace, instance.name + names.RW_SUFFIX)
    return members.document(
        base,
        host=host,
        hostaddr=found.hostaddr,
        password=found.password,
        ca_pem=found.ca_pem,
        member=member,
    )


def designate(ctx: Context, instance: Instance, primary: str, served: str | None) -> None:
    """Write the designated primary (and the request it serves) into the Secret."""
    name = members.replication_secret(instance)
    read = secrets.read(ctx.kube, instance.namespace, name)
    if not read.data.get(PASSWORD):
        return
    data = {**read.data, PRIMARY: primary}
    if served:
        data[SERVED] = served
    secrets.apply(ctx.kube, instance, name, data, read=read)


def write_secret(ctx: Context, instance: Instance) -> None:
    name = members.replication_secret(instance)
    read = secrets.read(ctx.kube, instance.namespace, name)
    if not read.data.get(PASSWORD):
        data = {**read.data, PASSWORD: secrets.new_password()}
        secrets.apply(ctx.kube, instance, name, data, read=read)


def apply_services(ctx: Context, instance: Instance, primary: str) -> None:
    for svc in members.services(instance, primary):
        ctx.kube.apply_service(svc)


def write_boot(ctx: Context, instance: Instance, member: str, *, replica: bool) -> None:
    """``member``'s boot data; the instance's own VM's keeps what the credentials step
    wrote and gets or loses ``replica`` only."""
    kube, ns = ctx.kube, instance.namespace
    found = sources(ctx, instance)
    if found is None:
        return
    doc = document(instance, found, member, replica=replica)
    name = f"{member}-cloudinit"
    read = secrets.read(kube, ns, name)
    data = {**read.data, bootstrap.USERDATA_KEY: bootstrap.to_userdata(doc)}
    # The instance's own: only over the read (the credentials step writes it too).
    secrets.apply(
        kube, instance, name, data, read=read if member == instance.name else read.uid_only()
    )


def apply_vm(
    ctx: Context,
    instance: Instance,
    member: str,
    observed: Manifest | None,
    *,
    create: bool,
    replica: bool,
) -> None:
    if create:
        _create_disks(ctx, instance, member)
    vm = member_vm(ctx, instance, member, observed, replica=replica)
    ctx.kube.apply_custom(*KUBEVIRT, "virtualmachines", vm)


def restart(ctx: Context, instance: Instance, member: str, vmi_uid: str) -> None:
    """Stop the member's server by deleting the VMI observed (its UID a precondition):
    it boots again from its boot data, a standby's."""
    only_that = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=vmi_uid))
    ctx.kube.objects.delete_namespaced_custom_object(
        *KUBEVIRT, instance.namespace, "virtualmachineinstances", member, body=only_that
    )


def remove(ctx: Context, instance: Instance, member: str) -> None:
    """A member beyond spec.instances: its VM, its disks, its boot data (its slot next)."""
    kube, ns = ctx.kube, instance.namespace
    kube.delete_custom(*KUBEVIRT, ns, "virtualmachines", member)
    for claim in kube.pvcs(ns, {names.MEMBER_LABEL: member}):
        if claim.metadata is not None and claim.metadata.name:
            kube.delete("PersistentVolumeClaim", ns, claim.metadata.name)
    kube.delete("Secret", ns, f"{member}-cloudinit")


def _create_disks(ctx: Context, instance: Instance, member: str) -> None:
    kube, ns = ctx.kube, instance.namespace
    if kube.pvc(ns, f"{member}-data") is None:
        kube.apply_pvc(members.data_claim(instance, member))
    image = image_for(instance, ctx.config.images) or ""
    if kube.pvc(ns, manifests.root_claim_name(member, image)) is None:
        storage_class = image_storage_class(ctx, image)
        kube.apply_pvc(members.root_claim(instance, member, image, storage_class=storage_class))


def on_member(ctx: Context, instance: Instance, member: str, kind: str, arg: str) -> None:
    """As the admin on ``member``: set the role, create or drop a slot, promote."""
    kube, home = ctx.kube, ctx.config.namespace
    address = addresses.address_of(addresses.vmi_of(kube, instance, member))
    if address is None:
        return
    admin = admin_credential.read(kube, home, instance.uid).password
    with postgres.connect(trust.server(kube, home, instance, address), password=admin) as conn:
        if kind == "set-role":
            read = secrets.read(kube, instance.namespace, members.replication_secret(instance))
            # The password reaches PostgreSQL as its SCRAM verifier only (dbi.scram).
            verifier = sql.Literal(scram.verifier(read.data.get(PASSWORD, "")))
            role = sql.Identifier(names.REPLICATION_USER)
            exists = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (names.REPLICATION_USER,)
            ).fetchone()
            verb = "ALTER" if exists else "CREATE"
            statement = sql.SQL(verb + " ROLE {} WITH LOGIN REPLICATION PASSWORD {}")
            conn.execute(statement.format(role, verifier))
        elif kind == "create-slot":
            conn.execute("SELECT pg_create_physical_replication_slot(%s)", (arg,))
        elif kind == "drop-slot":
            conn.execute("SELECT pg_drop_replication_slot(%s)", (arg,))
        elif kind == "promote":
            conn.execute("SELECT pg_promote(true, 60)")
