"""credentials (CredentialsReady): the admin credential, the app and cloud-init Secrets.

Observes the admin credential (in the orchestrator's namespace,
``activities.admin_credential``), the app credentials Secret and the cloud-init Secret
(in the instance's), and a legacy ``<name>-admin`` Secret there. An app or cloud-init
Secret that is not the instance's stops the step (``activities.ownership``).

A missing admin credential is recovered, never regenerated blindly: moved from a
legacy ``<name>-admin`` Secret (then that one is deleted), or taken from the deleted
instance the DBInstance adopts; made new only for an instance whose data disk does not
exist yet; otherwise (the credential lost) made new with a reset token, which the boot
data carries so that the guest sets it at its next boot (the admin step restarts it).
The cloud-init Secret carries only the admin password's SCRAM verifier, and the
instance's TLS server certificate and key, signed by the namespace's CA (created here
when the namespace has none: ``activities.trust``), issued anew when missing, not for
the Service's names, signed by another CA or due for renewal (a third of its lifetime
left; ``DBI_TLS_CERT_LIFETIME``); the tls step makes the guest serve it. An app password
is made only where there is none; a Secret deleted between the read and the apply (409
on the UID precondition) gets a fresh one there and then: that is the rotation by
deletion. One change of the admin credential per look, then Pending; passwords never
leave this activity. An instance restored from a backup (``spec.restore``) gets, in its
boot data, where the backup's files are (``activities.restore``: checked once, before
its data disk exists; Terminal ``RestoreSourceInvalid`` naming the field when the
backup is missing, not Completed or of another major). Idempotency key: the Secrets'
names and the credential's, keyed by the instance's UID; every write applies the
values it read or made.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum

from kubernetes import client as k8s
from pydantic import SecretStr
from temporalio import activity

from activities import admin_credential, manifests, ownership, restore, secrets, trust
from activities.admin_credential import Credential
from activities.kube import Instance, spares_reads
from activities.step import Anatomy, Context
from dbi import bootstrap, scram, tls
from dbi.pipeline import CREDENTIALS as SPEC
from dbi.steps import AT_ONCE, Decision, Outcome, StepInput


class Reason(StrEnum):
    READY = "SecretsReady"
    CREATED = "SecretsWritten"
    OWNERS_SYNCED = "OwnerReferencesSynced"
    ADMIN_MOVED = "AdminCredentialMoved"
    ADMIN_ADOPTED = "AdminCredentialAdopted"
    ADMIN_RESET = "AdminCredentialReset"
    CA_CREATED = "CACreated"
    CERTIFICATE_ISSUED = "CertificateIssued"
    RESTORE_DELIVERED = "RestoreDelivered"
    RESTORE_INVALID = "RestoreSourceInvalid"


class Action(StrEnum):
    WRITE = "write"  # what is incomplete: the app Secret, the cloud-init Secret, a new admin
    MOVE_ADMIN = "move-admin"  # a legacy <name>-admin Secret into the admin credential
    DROP_LEGACY = "drop-legacy"  # the legacy Secret, once moved
    ADOPT_ADMIN = "adopt-admin"  # the adopted instance's admin credential
    RESET_ADMIN = "reset-admin"  # a lost credential: a new one, set in the guest at boot
    CREATE_CA = "create-ca"  # the namespace's CA, which signs its instances' certificates


@dataclass(frozen=True, kw_only=True)
class Observation:
    secret_name: str  # the app credentials Secret's, which status publishes
    admin_complete: bool
    app_complete: bool
    cloudinit_matches: bool
    # The cloud-init Secret is kept under deletionPolicy Retain: its owner reference
    # follows the policy.
    kept_follow_policy: bool = True
    legacy_admin: bool = False  # the instance's own <name>-admin Secret, with a password
    # The admin credential of the deleted instance this one adopts (dbi.dev/adopt) is
    # still there: it is the one the adopted data knows, it replaces any other.
    adoptable_admin: bool = False
    data_disk_exists: bool = False  # the instance's own data claim
    ca_exists: bool = True  # the namespace's CA
    # The boot data's server certificate is the CA's, for the Service's names, with its
    # key, and not due for renewal.
    certificate_current: bool = True
    # spec.restore: the boot data carries the backup to start from (or none is asked).
    restore_delivered: bool = True
    restore_invalid: str | None = None  # why spec.restore's backup cannot be restored
    reads: Reads | None = None  # what was read, for the action (None in pure tests)


_ADMIN_RECOVERY = (
    ("legacy_admin", Action.MOVE_ADMIN, Reason.ADMIN_MOVED,
     "The admin credential moved out of the instance's namespace, into dbi's."),
    ("data_disk_exists", Action.RESET_ADMIN, Reason.ADMIN_RESET,
     "The admin credential was lost: a new one is set in the guest at its next boot."),
)  # fmt: skip


# Once the admin credential is settled: what is missing, in order, and what makes it.
_WRITES = (
    (("ca_exists",), Action.CREATE_CA, Reason.CA_CREATED,
     "The namespace's CA was created; it signs its instances' certificates."),
    (("admin_complete", "app_complete", "cloudinit_matches"), Action.WRITE, Reason.CREATED,
     "Missing Secrets or passwords were written."),
    (("certificate_current",), Action.WRITE, Reason.CERTIFICATE_ISSUED,
     "A server certificate was issued into the boot data; the tls step serves it."),
    (("restore_delivered",), Action.WRITE, Reason.RESTORE_DELIVERED,
     "The boot data names the backup spec.restore asks for; the first boot starts from it."),
    (("kept_follow_policy",), Action.WRITE, Reason.OWNERS_SYNCED,
     "The cloud-init Secret's owner reference now follows deletionPolicy."),
)  # fmt: skip


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""

    def pending(reason: Reason, message: str, action: Action) -> Decision[Action]:
        return Decision(
            SPEC.result(Outcome.PENDING, reason, message, requeue_after_seconds=AT_ONCE), action
        )

    if obs.adoptable_admin:
        message = "The adopted instance's admin credential was taken over."
        return pending(Reason.ADMIN_ADOPTED, message, Action.ADOPT_ADMIN)
    if not obs.admin_complete:
        for fact, action, reason, message in _ADMIN_RECOVERY:
            if getattr(obs, fact):
                return pending(reason, message, action)
    elif obs.legacy_admin:
        message = "The admin credential moved out of the instance's namespace, into dbi's."
        return pending(Reason.ADMIN_MOVED, message, Action.DROP_LEGACY)
    if obs.restore_invalid is not None:
        message = obs.restore_invalid[:512]
        return Decision(SPEC.result(Outcome.TERMINAL, Reason.RESTORE_INVALID, message))
    for facts, action, reason, message in _WRITES:
        if not all(getattr(obs, f) for f in facts):
            return pending(reason, message, action)
    return Decision(
        SPEC.result(
            Outcome.SATISFIED,
            Reason.READY,
            "The admin credential, the credentials and cloud-init Secrets are complete.",
            credentials_secret_name=obs.secret_name,
        )
    )


@dataclass(frozen=True)
class Reads:
    admin: Credential
    app: secrets.Read
    cloudinit: secrets.Read
    legacy: secrets.Read  # <name>-admin in the instance's namespace
    ca: tls.KeyPair | None  # the namespace's CA

    app_name: str
    cloudinit_name: str
    # The backup the boot data must name (spec.restore), once located; None: none.
    restore: bootstrap.Restore | None = None

    def children(self) -> list[ownership.Child]:
        """The Secrets under the instance's child names (the ownership check)."""
        return [
            ownership.Child("Secret", self.app_name, self.app.meta),
            ownership.Child("Secret", self.cloudinit_name, self.cloudinit.meta),
        ]


def read_all(ctx: Context, instance: Instance) -> Reads:
    """Read the Secrets; an idle pass (``activities.kube.spares_reads``) leaves out the
    legacy Secret, takes the CA this process read in the last minute and the cloud-init
    Secret it read in the last hour (``secrets.read_boot``): none changes but by a hand
    or a pass, and any action runs the pass again with all three read."""
    kube, ns = ctx.kube, instance.namespace
    spared = spares_reads()
    return Reads(
        admin=admin_credential.read(kube, ctx.config.namespace, instance.uid),
        app=secrets.read(kube, ns, secrets.app_name(instance)),
        cloudinit=secrets.read_boot(kube, instance),
        legacy=secrets.NONE if spared else secrets.read(kube, ns, secrets.admin_name(instance)),
        ca=(trust.recent_ca if spared else trust.read_ca)(kube, ctx.config.namespace, ns),
        app_name=secrets.app_name(instance),
        cloudinit_name=secrets.cloudinit_name(instance),
    )


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    """Read the Secrets and reduce them to facts; the adopted instance's credential is
    read only when the instance adopts one, the data claim only when the admin credential
    is missing."""
    reads = read_all(ctx, instance)
    source, invalid = _restore(ctx, instance, reads)
    reads = replace(reads, restore=source)
    admin, app = reads.admin, reads.app
    legacy = ownership.Child("Secret", secrets.admin_name(instance), reads.legacy.meta)
    missing = not admin.password
    adopted = instance.adopts
    return Observation(
        secret_name=secrets.app_name(instance),
        admin_complete=not missing,
        app_complete=bool(app.password) and app_matches(instance, app),
        cloudinit_matches=not missing and userdata_matches(reads.cloudinit, admin),
        kept_follow_policy=ownership.follows_policy(reads.children()[1], instance),
        legacy_admin=bool(reads.legacy.password)
        and ownership.classify(legacy, instance.uid) is ownership.Claim.OURS,
        adoptable_admin=adopted is not None
        and bool(admin_credential.read(ctx.kube, ctx.config.namespace, adopted).password),
        data_disk_exists=missing and _own_data_claim(ctx, instance),
        ca_exists=reads.ca is not None,
        certificate_current=certificate_current(instance, reads),
        restore_delivered=restore_delivered(reads),
        restore_invalid=invalid,
        reads=reads,
    )


def _restore(
    ctx: Context, instance: Instance, reads: Reads
) -> tuple[bootstrap.Restore | None, str | None]:
    """The backup the boot data must name: the one it names already, else (before the
    data disk exists) the one spec.restore names, located; or why it cannot be."""
    asked = instance.model.spec.restore
    if asked is None:
        return None, None
    doc = secrets.boot_data(reads.cloudinit)
    if doc is not None and doc.restore is not None and doc.restore.backup == asked.from_.backup:
        return doc.restore, None
    if _own_data_claim(ctx, instance):
        return None, None  # the data exists: the first boot is past
    return restore.source(ctx, instance)


def restore_delivered(reads: Reads) -> bool:
    """Whether the boot data names the backup it must (none when none is asked)."""
    doc = secrets.boot_data(reads.cloudinit)
    return (doc.restore if doc is not None else None) == reads.restore


def _own_data_claim(ctx: Context, instance: Instance) -> bool:
    """Whether the instance's own data claim exists: its data has an admin password."""
    name = manifests.data_claim_name(instance)
    meta = ownership.meta_of(ctx.kube.pvc(instance.namespace, name), ctx.kube)
    claim = ownership.Child("PersistentVolumeClaim", name, meta)
    return ownership.classify(claim, instance.uid) is ownership.Claim.OURS


def _boot_pair(reads: Reads) -> tls.KeyPair | None:
    doc = secrets.boot_data(reads.cloudinit)
    return doc.server_pair() if doc is not None else None


def certificate_current(instance: Instance, reads: Reads) -> bool:
    """Whether the boot data's server certificate may stay: the namespace CA's, for the
    Service's names, with its key, and not due for renewal."""
    pair = _boot_pair(reads)
    if pair is None or reads.ca is None:
        return False
    verdict = tls.judge(
        pair.cert_pem,
        reads.ca.cert_pem,
        tls.service_names(instance.namespace, instance.name),
        key_pem=pair.key_pem,
    )
    return verdict.trusted and not verdict.renewal_due


def userdata_matches(cloudinit: secrets.Read, admin: Credential) -> bool:
    """Whether the cloud-init Secret delivers the admin password's verifier (and its
    pending reset, if there is one)."""
    doc = secrets.boot_data(cloudinit)
    if doc is None:
        return False
    verifier = doc.admin_verifier or ""
    return doc.reset == admin.reset and scram.verifies(admin.password, verifier)


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    """Perform the decided action (one write of the admin credential at most)."""
    kube, home, reads = ctx.kube, ctx.config.namespace, obs.reads
    assert reads is not None
    if action is Action.MOVE_ADMIN:
        admin_credential.create(kube, home, instance, reads.legacy.password)
    elif action is Action.DROP_LEGACY:
        kube.delete("Secret", instance.namespace, secrets.admin_name(instance))
    elif action is Action.ADOPT_ADMIN:
        admin_credential.take_over(kube, home, instance, str(instance.adopts))
    elif action is Action.RESET_ADMIN:
        admin_credential.create(kube, home, instance, secrets.new_password(), reset=True)
    elif action is Action.CREATE_CA:
        trust.create_ca(kube, home, instance.namespace)
    elif action is Action.WRITE:
        write_incomplete(ctx, instance, reads)


def write_incomplete(ctx: Context, instance: Instance, reads: Reads) -> None:
    """Write what is incomplete: a new admin credential for a new instance, the app
    Secret (a password only where there is none), the cloud-init Secret (again when its
    owner reference does not follow deletionPolicy)."""
    kube, admin, app = ctx.kube, reads.admin, reads.app
    if not admin.password:
        admin = admin_credential.create(
            kube, ctx.config.namespace, instance, secrets.new_password()
        )
    if not (app.password and app_matches(instance, app)):
        _write(
            ctx,
            instance,
            secrets.app_name(instance),
            app,
            lambda pw: _app_data(instance, app, pw),
            keep=app.password,
        )
    pair = _server_pair(ctx, instance, reads)
    written = secrets.boot_data(reads.cloudinit)
    doc = bootstrap.Bootstrap(
        admin_verifier=scram.verifier(admin.password),
        reset=admin.reset,
        memory_bytes=int(instance.model.spec.resources.memory_bytes()),
        server_cert=pair.cert_pem if pair else None,
        server_key=SecretStr(pair.key_pem) if pair else None,
        restore=reads.restore,
        # A major upgrade's instruction belongs to the upgrade (activities.upgrade).
        upgrade=written.upgrade if written is not None else None,
    )
    if (
        not userdata_matches(reads.cloudinit, admin)
        or not restore_delivered(reads)
        or not ownership.follows_policy(reads.children()[1], instance)
        or not certificate_current(instance, reads)
    ):
        secrets.apply(
            kube,
            instance,
            secrets.cloudinit_name(instance),
            {bootstrap.USERDATA_KEY: bootstrap.to_userdata(doc)},
            read=reads.cloudinit.uid_only(),
        )


def _server_pair(ctx: Context, instance: Instance, reads: Reads) -> tls.KeyPair | None:
    """The boot data's certificate and key when they may stay, else new ones from the
    namespace's CA (None without a CA: the next pass creates it)."""
    if certificate_current(instance, reads):
        return _boot_pair(reads)
    if reads.ca is None:
        return None
    names = tls.service_names(instance.namespace, instance.name)
    return tls.issue(reads.ca, names, lifetime=timedelta(seconds=ctx.config.tls_cert_seconds))


def app_matches(instance: Instance, app: secrets.Read) -> bool:
    """Whether the app Secret names the spec's role and database."""
    creds = instance.model.spec.credentials
    return (app.data.get("username"), app.data.get("database")) == (
        creds.username,
        creds.database,
    )


def _app_data(instance: Instance, current: secrets.Read, password: str) -> dict[str, str]:
    creds = instance.model.spec.credentials
    # Keep what the access step added (host, port, uri): an apply owns exactly its keys.
    return {
        **current.data,
        "username": creds.username,
        "database": creds.database,
        "password": password,
    }


def _write(
    ctx: Context,
    instance: Instance,
    name: str,
    current: secrets.Read,
    data_for: Callable[[str], dict[str, str]],
    *,
    keep: str = "",
) -> str | None:
    """Apply a Secret with the password it has (``keep``) or a new one; return the password,
    or None when the Secret was written after it was read (a user setting their own
    password): nothing is written, and the next look reads it again.

    A 409 on the UID precondition means the Secret was deleted after it was read: a new
    password is made and applied without the precondition.
    """
    password = keep or secrets.new_password()
    try:
        secrets.apply(
            ctx.kube,
            instance,
            name,
            data_for(password),
            read=current,
            annotations=secrets.ours(current),
        )
    except k8s.ApiException as e:
        if not secrets.conflict(e):
            raise
        if secrets.read(ctx.kube, instance.namespace, name).uid is not None:
            activity.logger.info("Secret %s was written after it was read; read again", name)
            return None
        activity.logger.info("Secret %s was deleted after it was read; new password", name)
        password = secrets.new_password()
        secrets.apply(ctx.kube, instance, name, data_for(password), read=secrets.NONE)
    return password


def children(obs: Observation) -> list[ownership.Child]:
    return [] if obs.reads is None else obs.reads.children()


STEP = Anatomy(SPEC, observe, decide, act, children)
