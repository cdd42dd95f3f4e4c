"""credentials (CredentialsReady): the admin credential, the app and cloud-init Secrets.

Observes the admin credential (in the orchestrator's namespace,
``activities.infra.admin_credential``), the app credentials Secret and the cloud-init Secret
(in the instance's). An app or cloud-init Secret that is not the instance's stops the
step (``activities.infra.ownership``).

A missing admin credential is recovered, never regenerated blindly: taken from the
deleted instance the DBInstance adopts (``dbi.dev/adopt``); made new only for an
instance whose data disk does not exist yet; otherwise (the credential lost) made new
with a reset token, which the boot data carries so that the guest sets it at its next
boot (the admin step restarts it). The adopt annotation is a tenant's claim, never
proof: a credential is taken over only when dbi wrote it for an instance of the same
namespace and name (its labels, in dbi's namespace) and this instance's data claim is
bound to the volume dbi marked with that instance's UID (the volume's ``claimRef``);
otherwise the step is Terminal (``AdoptionRefused``), naming the UID, and nothing is
touched.
The cloud-init Secret carries only the admin password's SCRAM verifier, and the
instance's TLS server certificate and key, signed by the namespace's CA (created here
when the namespace has none: ``activities.infra.trust``), issued anew when missing, not for
the Service's names, signed by another CA or due for renewal (a third of its lifetime
left; ``DBI_TLS_CERT_LIFETIME``); the tls step makes the guest serve it. An app password
is made only where there is none; a Secret deleted between the read and the apply (409
on the UID precondition) gets a fresh one there and then: that is the rotation by
deletion. One change of the admin credential per look, then Pending; passwords never
leave this activity. An instance restored from a backup (``spec.restore``) gets, in its
boot data, where the backup's files are (``activities.infra.restore``: checked once, before
its data disk exists; Terminal ``RestoreSourceInvalid`` naming the field when the
backup is missing, not Completed or of another major). Idempotency key: the Secrets'
names and the credential's, keyed by the instance's UID; every write applies the
values it read or made.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from activities.infra import (
    admin_credential,
    bootdata,
    ownership,
    restore,
    secrets,
    trust,
    volumes,
)
from activities.infra.admin_credential import Credential
from activities.infra.context import Context
from activities.infra.kube import Instance
from activities.infra.reads import spares_reads
from activities.steps.loop import Anatomy
from dbi import bootstrap, names, tls
from dbi.pipeline import CREDENTIALS as SPEC
from dbi.steps import AT_ONCE, Common, Decision, StepInput


class Reason(StrEnum):
    READY = "SecretsReady"
    CREATED = "SecretsWritten"
    OWNERS_SYNCED = Common.OWNERS_SYNCED
    ADMIN_ADOPTED = "AdminCredentialAdopted"
    ADOPTION_REFUSED = "AdoptionRefused"
    ADMIN_RESET = "AdminCredentialReset"
    CA_CREATED = "CACreated"
    CERTIFICATE_ISSUED = "CertificateIssued"
    RESTORE_DELIVERED = "RestoreDelivered"
    RESTORE_CLEARED = "RestoreCleared"
    RESTORE_INVALID = "RestoreSourceInvalid"


class Action(StrEnum):
    WRITE = "write"  # what is incomplete: the app Secret, the cloud-init Secret, a new admin
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
    # The admin credential of the deleted instance this one adopts (dbi.dev/adopt) is
    # still there and may be taken: it is the one the adopted data knows, it replaces
    # any other.
    adoptable_admin: bool = False
    # The UID dbi.dev/adopt names when its credential is there but may not be taken.
    adoption_refused: str | None = None
    data_disk_exists: bool = False  # the instance's own data claim
    ca_exists: bool = True  # the namespace's CA
    # The boot data's server certificate is the CA's, for the Service's names, with its
    # key, and not due for renewal.
    certificate_current: bool = True
    # spec.restore: the boot data carries the backup to start from (or none is asked).
    restore_delivered: bool = True
    # ... and no longer once the instance started from it (its URLs read the backup).
    restore_cleared: bool = True
    restore_invalid: str | None = None  # why spec.restore's backup cannot be restored
    children: tuple[ownership.Child, ...] = ()  # the app and cloud-init Secrets
    # The Secrets' resourceVersions as read: the action acts on those only (``Reads``).
    versions: tuple[str | None, ...] = ()


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
    (("restore_cleared",), Action.WRITE, Reason.RESTORE_CLEARED,
     "The instance started from its backup; the boot data no longer says where it is."),
    (("kept_follow_policy",), Action.WRITE, Reason.OWNERS_SYNCED,
     "The cloud-init Secret's owner reference now follows deletionPolicy."),
)  # fmt: skip


def decide(obs: Observation) -> Decision[Action]:
    """Return the outcome and the one action to take (pure)."""

    if obs.adoption_refused is not None:
        return SPEC.terminal(Reason.ADOPTION_REFUSED, refusal(obs))
    if obs.adoptable_admin:
        message = "The adopted instance's admin credential was taken over."
        return SPEC.pending(Reason.ADMIN_ADOPTED, message, Action.ADOPT_ADMIN, after=AT_ONCE)
    if not obs.admin_complete and obs.data_disk_exists:
        message = "The admin credential was lost: a new one is set in the guest at its next boot."
        return SPEC.pending(Reason.ADMIN_RESET, message, Action.RESET_ADMIN, after=AT_ONCE)
    if obs.restore_invalid is not None:
        message = obs.restore_invalid[:512]
        return SPEC.terminal(Reason.RESTORE_INVALID, message)
    for facts, action, reason, message in _WRITES:
        if not all(getattr(obs, f) for f in facts):
            return SPEC.pending(reason, message, action, after=AT_ONCE)
    return SPEC.satisfied(
        Reason.READY,
        "The admin credential, the credentials and cloud-init Secrets are complete.",
        credentials_secret_name=obs.secret_name,
    )


def refusal(obs: Observation) -> str:
    """What a refused dbi.dev/adopt says (pure)."""
    return (
        f"{names.ADOPT_ANNOTATION} names {obs.adoption_refused}, which this instance may not "
        "adopt: dbi takes over only the admin credential of a deleted instance of this "
        "namespace and name whose data disk this instance holds. Nothing was taken over; "
        "remove the annotation."
    )


@dataclass(frozen=True)
class Reads:
    admin: Credential
    app: secrets.Read
    cloudinit: secrets.Read
    ca: tls.KeyPair | None  # the namespace's CA

    app_name: str
    cloudinit_name: str
    # The backup the boot data must name (spec.restore), once located; None: none.
    restore: bootstrap.Restore | None = None
    # The adopted instance's admin credential, when this instance may take it over.
    adopted: Credential | None = None

    def versions(self) -> tuple[str | None, ...]:
        """Which Secrets were read: another read with the same is the same."""
        adopted = self.adopted.resource_version if self.adopted is not None else None
        return (
            self.admin.resource_version,
            self.app.resource_version,
            self.cloudinit.resource_version,
            tls.fingerprint(self.ca.cert_pem) if self.ca is not None else None,
            adopted,
        )

    def children(self) -> list[ownership.Child]:
        """The Secrets under the instance's child names (the ownership check)."""
        return [
            ownership.Child("Secret", self.app_name, self.app.meta),
            ownership.Child("Secret", self.cloudinit_name, self.cloudinit.meta),
        ]


def read_all(ctx: Context, instance: Instance) -> Reads:
    """Read the Secrets; an idle pass (``activities.infra.reads.spares_reads``) takes the CA
    this process read in the last minute and the cloud-init Secret it read in the last
    hour (``secrets.read_boot``): neither changes but by a hand or a pass, and any
    action runs the pass again with both read."""
    kube, ns = ctx.kube, instance.namespace
    spared = spares_reads()
    return Reads(
        admin=admin_credential.read(kube, ctx.config.namespace, instance.uid),
        app=secrets.read(kube, ns, secrets.app_name(instance)),
        cloudinit=secrets.read_boot(kube, instance),
        ca=(trust.recent_ca if spared else trust.read_ca)(kube, ctx.config.namespace, ns),
        app_name=secrets.app_name(instance),
        cloudinit_name=secrets.cloudinit_name(instance),
    )


def gather(ctx: Context, instance: Instance) -> tuple[Reads, str | None, str | None]:
    """Read the Secrets, the backup to restore from and the credential to adopt; with
    why spec.restore cannot be restored and which UID may not be adopted (None: none)."""
    reads = read_all(ctx, instance)
    doc = secrets.boot_data(reads.cloudinit)
    password = reads.admin.password
    source, invalid = restore.wanted(ctx, instance, doc, ca=reads.ca, admin_password=password)
    adopted, refused = _adoption(ctx, instance)
    return replace(reads, restore=source, adopted=adopted), invalid, refused


def observe(ctx: Context, instance: Instance, step_input: StepInput) -> Observation:
    """Read the Secrets and reduce them to facts; the adopted instance's credential is
    read only when the instance adopts one, the data claim only when the admin credential
    is missing."""
    reads, invalid, refused = gather(ctx, instance)
    admin, app, doc = reads.admin, reads.app, secrets.boot_data(reads.cloudinit)
    missing = not admin.password
    delivered = bootdata.names_restore(doc, reads.restore)
    return Observation(
        secret_name=secrets.app_name(instance),
        admin_complete=not missing,
        app_complete=bool(app.password) and app_matches(instance, app),
        cloudinit_matches=not missing and bootdata.carries_admin(doc, admin),
        kept_follow_policy=ownership.follows_policy(reads.children()[1], instance),
        adoptable_admin=reads.adopted is not None,
        adoption_refused=refused,
        data_disk_exists=missing and volumes.own_data_claim(ctx, instance),
        ca_exists=reads.ca is not None,
        certificate_current=bootdata.certificate_current(instance, doc, reads.ca),
        restore_delivered=delivered or reads.restore is None,
        restore_cleared=reads.restore is not None or delivered,
        restore_invalid=invalid,
        children=tuple(reads.children()),
        versions=reads.versions(),
    )


def _adoption(ctx: Context, instance: Instance) -> tuple[Credential | None, str | None]:
    """The admin credential of the deleted instance dbi.dev/adopt names, when this
    instance may take it over; else the UID it may not adopt; (None, None): nothing to
    take (no annotation, or no credential of that UID, or one taken over already).

    What a tenant writes is a claim; the proof is what only dbi writes: the credential's
    labels, in dbi's namespace, name this instance's namespace and name (so its instance
    is deleted: the name is this one's now), and this instance's data claim is bound
    (the volume's ``claimRef``) to the volume dbi marked with that UID."""
    old = instance.adopts
    if old is None or old == instance.uid:
        return None, None
    found = admin_credential.read(ctx.kube, ctx.config.namespace, old)
    if not found.password:
        return None, None
    if found.of(instance.namespace, instance.name) and volumes.marked_for(ctx, instance, old):
        return found, None
    return None, old


def act(ctx: Context, instance: Instance, obs: Observation, action: Action) -> None:
    """Perform the decided action (one write of the admin credential at most) on the
    Secrets as observed; any written since is left alone (the next look observes it)."""
    kube, home = ctx.kube, ctx.config.namespace
    reads, _, _ = gather(ctx, instance)
    if reads.versions() != obs.versions:
        return
    if action is Action.ADOPT_ADMIN:
        assert reads.adopted is not None
        admin_credential.take_over(kube, home, instance, str(instance.adopts), reads.adopted)
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
        secrets.apply_password(
            ctx.kube,
            instance,
            secrets.app_name(instance),
            app,
            lambda pw: _app_data(instance, app, pw),
            keep=app.password,
        )
    written = secrets.boot_data(reads.cloudinit)
    pair = bootdata.pair_for(instance, written, reads.ca, ctx.config.tls_cert_seconds)
    if (
        not bootdata.carries_admin(written, admin)
        or not bootdata.names_restore(written, reads.restore)
        or not ownership.follows_policy(reads.children()[1], instance)
        or not bootdata.certificate_current(instance, written, reads.ca)
    ):
        doc = bootdata.document(instance, admin, pair, reads.restore, written)
        secrets.apply(
            kube,
            instance,
            secrets.cloudinit_name(instance),
            {bootstrap.USERDATA_KEY: bootstrap.to_userdata(doc)},
            read=reads.cloudinit.uid_only(),
        )


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


STEP = Anatomy(SPEC, observe, decide, act, lambda obs: list(obs.children))
