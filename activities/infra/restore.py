"""The backup a restored instance starts from (``spec.restore``), checked and located.

The credentials step asks for it while the instance's boot data has none: the DBBackup
must exist in the instance's namespace, have Completed, hold spec.version's major, and
have its manifest in the store; then the boot data gets where to fetch its two tarballs
(``dbi.bootstrap.Restore``). Once delivered, the boot data keeps it and this is not
asked again: a restored instance does not depend on its backup staying (retention may
delete it).
"""

from __future__ import annotations

from activities.infra import addresses, backupstore, postgres, trust, volumes
from activities.infra.context import Context
from activities.infra.kube import Instance
from dbi import backups, bootstrap, names, tls
from dbi.backups import BackupPhase, StoreRef, Taken

FIELD = "spec.restore.from.backup"


def source(ctx: Context, instance: Instance) -> tuple[bootstrap.Restore | None, str | None]:
    """The backup to deliver, or None and why it cannot be restored (a sentence naming
    the field)."""
    spec = instance.model.spec
    assert spec.restore is not None
    name, ns = spec.restore.from_.backup, instance.namespace
    found = ctx.kube.get_custom(names.GROUP, names.VERSION, ns, names.BACKUP_PLURAL, name)
    if found is None:
        return None, f"{FIELD}: there is no DBBackup {name} in {ns} (dbi backups lists them)."
    status = found.get("status", {})
    if status.get("phase") != BackupPhase.COMPLETED:
        return None, f"{FIELD}: DBBackup {name} is {status.get('phase') or 'new'}, not Completed."
    held = postgres.major(status.get("postgresVersion"))
    if held != spec.version:
        return None, (
            f"{FIELD}: DBBackup {name} holds PostgreSQL {status.get('postgresVersion')}, "
            f"but spec.version is {spec.version}."
        )
    ref = status.get("store")
    try:
        store_ref = StoreRef.model_validate(ref) if ref else None
        store = backupstore.for_ref(ctx.kube, ctx.config, ns, store_ref)
    except ValueError as e:
        return None, f"{FIELD}: DBBackup {name}'s store cannot be read ({e})."
    prefix = backups.store_prefix(ns, found.get("spec", {}).get("instance", ""), name)
    manifest = store.read(prefix + backupstore.MANIFEST)
    try:
        taken = Taken.model_validate_json(manifest or b"")
        base, wal = taken.key("base.tar.gz"), taken.key("pg_wal.tar.gz")
    except (ValueError, KeyError):
        return None, f"{FIELD}: DBBackup {name}'s files are not in the store."
    return (
        bootstrap.Restore(
            backup=name, base_url=store.url(prefix + base), wal_url=store.url(prefix + wal)
        ),
        None,
    )


def wanted(
    ctx: Context,
    instance: Instance,
    doc: bootstrap.Bootstrap | None,
    *,
    ca: tls.KeyPair | None,
    admin_password: str,
) -> tuple[bootstrap.Restore | None, str | None]:
    """The backup the boot data (``doc``) must name: the one it names already, else
    (before the data disk exists) the one spec.restore names, located; or why it cannot
    be."""
    asked = instance.model.spec.restore
    if asked is None:
        return None, None
    if doc is not None and doc.restore is not None and doc.restore.backup == asked.from_.backup:
        if restored(ctx, instance, ca, admin_password):
            return None, None  # its URLs (a presigned read of the backup) leave the boot data
        return doc.restore, None
    if volumes.own_data_claim(ctx, instance):
        return None, None  # the data exists: the first boot is past
    return source(ctx, instance)


def restored(ctx: Context, instance: Instance, ca: tls.KeyPair | None, admin_password: str) -> bool:
    """Whether the instance started from its backup: its PostgreSQL, on its own data
    claim, lets dbi's admin in (the first boot unpacks the backup before it starts it).
    Asked only while the boot data still names the backup."""
    address = addresses.address_of(addresses.vmi_of(ctx.kube, instance))
    if address is None or ca is None or not volumes.own_data_claim(ctx, instance):
        return False
    server = trust.reach(instance, address, ca)
    return postgres.login(server, password=admin_password) is postgres.Login.OK
