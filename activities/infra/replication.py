"""What the replicas step (``activities.steps.replicas``) changes: the replication
role's Secret and the role, the members' slots, boot data, disks and VMs, the Services
of the members, and what a member beyond spec.instances leaves."""

from __future__ import annotations

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
from dbi import bootstrap, names, scram


def member_vm(ctx: Context, instance: Instance, member: str, observed: Manifest | None) -> Manifest:
    """The replica's VM to apply: the spec's size and power, its root disk as observed."""
    root = manifests.root_of(observed) or manifests.root_claim_name(
        member, image_for(instance, ctx.config.images) or ""
    )
    vm = manifests.vm(
        instance, run_strategy=desired_strategy(instance), root_claim=root, member=member
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


def document(
    instance: Instance, boot: bootstrap.Bootstrap, hostaddr: str, password: str, ca: str, m: str
) -> bootstrap.Bootstrap:
    host = names.service_host(instance.namespace, instance.name)
    return members.document(
        boot, host=host, hostaddr=hostaddr, password=password, ca_pem=ca, member=m
    )


def write_secret(ctx: Context, instance: Instance) -> None:
    name = members.replication_secret(instance)
    read = secrets.read(ctx.kube, instance.namespace, name)
    if not read.password:
        secrets.apply(ctx.kube, instance, name, {"password": secrets.new_password()}, read=read)


def apply_services(ctx: Context, instance: Instance) -> None:
    for svc in members.services(instance):
        ctx.kube.core.patch_namespaced_service(
            svc["metadata"]["name"],
            instance.namespace,
            svc,
            field_manager=names.FIELD_MANAGER,
            force=True,
            _content_type="application/apply-patch+yaml",
        )


def write_boot(ctx: Context, instance: Instance, member: str) -> None:
    kube, ns = ctx.kube, instance.namespace
    password = secrets.read(kube, ns, members.replication_secret(instance)).password
    boot = secrets.boot_data(secrets.read_boot(kube, instance))
    svc = kube.service(ns, instance.name) or {}
    ca = trust.recent_ca(kube, ctx.config.namespace, ns)
    hostaddr = (svc.get("spec") or {}).get("clusterIP") or ""
    if boot is None or ca is None or not password or not hostaddr:
        return
    doc = document(instance, boot, hostaddr, password, ca.cert_pem, member)
    name = f"{member}-cloudinit"
    data = {bootstrap.USERDATA_KEY: bootstrap.to_userdata(doc)}
    secrets.apply(kube, instance, name, data, read=secrets.read(kube, ns, name).uid_only())


def apply_vm(
    ctx: Context, instance: Instance, member: str, observed: Manifest | None, *, create: bool
) -> None:
    if create:
        _create_disks(ctx, instance, member)
    vm = member_vm(ctx, instance, member, observed)
    ctx.kube.apply_custom(*KUBEVIRT, "virtualmachines", vm)


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


def on_primary(ctx: Context, instance: Instance, kind: str, member: str) -> None:
    """The role and the slots, as the admin on the primary."""
    kube, home = ctx.kube, ctx.config.namespace
    address = addresses.address_of(addresses.vmi_of(kube, instance))
    if address is None:
        return
    admin = admin_credential.read(kube, home, instance.uid).password
    with postgres.connect(trust.server(kube, home, instance, address), password=admin) as conn:
        if kind == "set-role":
            password = secrets.read(
                kube, instance.namespace, members.replication_secret(instance)
            ).password
            # The password reaches PostgreSQL as its SCRAM verifier only (dbi.scram).
            verifier = sql.Literal(scram.verifier(password))
            role = sql.Identifier(names.REPLICATION_USER)
            exists = conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (names.REPLICATION_USER,)
            ).fetchone()
            verb = "ALTER" if exists else "CREATE"
            conn.execute(
                sql.SQL(verb + " ROLE {} WITH LOGIN REPLICATION PASSWORD {}").format(role, verifier)
            )
        elif kind == "create-slot":
            conn.execute("SELECT pg_create_physical_replication_slot(%s)", (members.slot(member),))
        elif kind == "drop-slot":
            conn.execute("SELECT pg_drop_replication_slot(%s)", (member,))
