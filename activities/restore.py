"""The backup a restored instance starts from (``spec.restore``), checked and located.

The credentials step asks for it while the instance's boot data has none: the DBBackup
must exist in the instance's namespace, have Completed, hold spec.version's major, and
have its manifest in the store; then the boot data gets where to fetch its two tarballs
(``dbi.bootstrap.Restore``). Once delivered, the boot data keeps it and this is not
asked again: a restored instance does not depend on its backup staying (retention may
delete it).
"""

from __future__ import annotations

from activities import backupstore
from activities.kube import Instance
from activities.postgres import major
from activities.step import Context
from dbi import backups, bootstrap, names
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
    held = major(status.get("postgresVersion"))
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
