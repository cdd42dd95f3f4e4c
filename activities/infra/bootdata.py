"""The boot data: the document in an instance's cloud-init Secret (``dbi.bootstrap``)
that the guest reads at every boot, as the steps judge it and the credentials step
makes it: the admin password's verifier and its pending reset, the server certificate
and key, the backup to restore from, and a major upgrade's instruction."""

from __future__ import annotations

from datetime import timedelta

from pydantic import SecretStr
from temporalio.exceptions import ApplicationError

from activities.infra import members, secrets
from activities.infra.admin_credential import Credential
from activities.infra.kube import Instance, Kube
from dbi import bootstrap, scram, tls
from dbi.bootstrap import Bootstrap


def carries_admin(doc: Bootstrap | None, admin: Credential) -> bool:
    """Whether the boot data delivers the admin password's verifier (and its pending
    reset, if there is one)."""
    if doc is None:
        return False
    verifier = doc.admin_verifier or ""
    return doc.reset == admin.reset and scram.verifies(admin.password, verifier)


def server_pair(doc: Bootstrap | None) -> tls.KeyPair | None:
    """The server certificate and key the boot data carries, if any."""
    return doc.server_pair() if doc is not None else None


def certificate_current(instance: Instance, doc: Bootstrap | None, ca: tls.KeyPair | None) -> bool:
    """Whether the boot data's server certificate may stay: the namespace CA's (``ca``),
    for the Service's names, with its key, and not due for renewal."""
    pair = server_pair(doc)
    if pair is None or ca is None:
        return False
    verdict = tls.judge(
        pair.cert_pem,
        ca.cert_pem,
        members.certificate_names(instance),
        key_pem=pair.key_pem,
    )
    return verdict.trusted and not verdict.renewal_due


def names_restore(doc: Bootstrap | None, restore: bootstrap.Restore | None) -> bool:
    """Whether the boot data names the backup it must (none when none is asked)."""
    return (doc.restore if doc is not None else None) == restore


def pair_for(
    instance: Instance, doc: Bootstrap | None, ca: tls.KeyPair | None, lifetime_seconds: float
) -> tls.KeyPair | None:
    """The boot data's certificate and key when they may stay, else new ones from the
    namespace's CA (None without a CA: the next pass creates it)."""
    if certificate_current(instance, doc, ca):
        return server_pair(doc)
    if ca is None:
        return None
    names = members.certificate_names(instance)
    return tls.issue(ca, names, lifetime=timedelta(seconds=lifetime_seconds))


def document(
    instance: Instance,
    admin: Credential,
    pair: tls.KeyPair | None,
    restore: bootstrap.Restore | None,
    written: Bootstrap | None,
) -> Bootstrap:
    """The boot data for ``admin``'s password, ``pair`` and ``restore``; a major
    upgrade's instruction and a replica's primary stay as ``written`` has them (they
    are the upgrade step's and the replicas step's)."""
    return Bootstrap(
        admin_verifier=scram.verifier(admin.password),
        reset=admin.reset,
        memory_bytes=int(instance.model.spec.resources.memory_bytes()),
        server_cert=pair.cert_pem if pair else None,
        server_key=SecretStr(pair.key_pem) if pair else None,
        restore=restore,
        upgrade=written.upgrade if written is not None else None,
        replica=written.replica if written is not None else None,
    )


def instruct_upgrade(kube: Kube, instance: Instance, upgrade: bootstrap.Upgrade | None) -> None:
    """Put a major upgrade's instruction into the boot data (None: take it out), unless
    it is there (``activities.operations.pgupgrade``)."""
    name = secrets.cloudinit_name(instance)
    read = secrets.read(kube, instance.namespace, name)
    doc = secrets.boot_data(read)
    if doc is None:
        raise ApplicationError("The instance has no boot data yet.")
    if doc.upgrade == upgrade:
        return
    updated = doc.model_copy(update=dict(upgrade=upgrade))  # a keyword: "upgrade" is a step
    secrets.apply(
        kube,
        instance,
        name,
        {**read.data, bootstrap.USERDATA_KEY: bootstrap.to_userdata(updated)},
        read=read.uid_only(),
    )
