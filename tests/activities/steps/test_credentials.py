"""Credentials and access on the real stack (the Secret is the source of truth, rotation
is race-free, no password leaks), and the credentials step's decision (plain data)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import psycopg
import pytest
from kubernetes import client as k8s
from prometheus_client import REGISTRY, generate_latest

from activities.infra import connection, postgres, secrets, trust
from activities.infra.admin_credential import Credential
from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from activities.operations.rotation import RotateCredentials, rotate_admin
from activities.steps import access, admin, credentials
from dbi import bootstrap, names, tls
from dbi.config import ADMIN_USER, Config
from dbi.messages import RotationRequest, RotationResult, Wake
from dbi.steps import Outcome, StepInput
from dbi.telemetry import json_formatter
from devstack import tools
from devstack.stack import StackInfo
from tests.activities.lifecycle import SPEC, create, ready, uri
from tests.activities.logins import address, admin_credential, app_works, logs_in, secret, settled
from tests.appclient import conninfo
from tests.history import every_run
from tests.orchestrator import Orchestrator
from tests.spans import EXPORTER, finished
from watcher.watcher import Watcher

pytestmark = pytest.mark.stack


async def test_the_app_secret_connects_and_the_admin_password_is_the_admins_only(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """The app Secret's uri opens the app database; the admin password works for the admin only."""
    await create(orchestrator, namespace)
    app = await settled(orchestrator, namespace, kube_api)
    with psycopg.connect(conninfo(app), connect_timeout=3, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (n int)")
    admin = admin_credential(kube_api, orchestrator, namespace)["password"]
    assert logs_in(address(app), ADMIN_USER, admin, "postgres")
    assert not logs_in(address(app), "app", admin, "app")
    assert not logs_in(address(app), ADMIN_USER, app["password"], "postgres")


async def test_passes_keep_the_password_and_an_emptied_one_is_replaced(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Many passes keep the same password; a Secret whose password was emptied, or edited
    into bytes that are not text, gets a new one."""
    await create(orchestrator, namespace)
    first = (await settled(orchestrator, namespace, kube_api))["password"]
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    for n in range(5):
        await handle.signal("wake", Wake(reason=f"test pass {n}"))
        await asyncio.sleep(0.5)
    assert secret(kube_api, namespace, "db-credentials")["password"] == first

    k8s.CoreV1Api(kube_api).patch_namespaced_secret(
        "db-credentials", namespace, {"stringData": {"password": ""}}
    )
    await orchestrator.until(
        lambda: secret(kube_api, namespace, "db-credentials").get("password") not in ("", first),
        what="a new password",
    )
    second = (await settled(orchestrator, namespace, kube_api))["password"]
    assert second != first
    assert not app_works(kube_api, namespace, first)

    # A password edited into bytes that are not text is repaired the same way.
    garbled = base64.b64encode(b"\xff\xfe\x00").decode()
    k8s.CoreV1Api(kube_api).patch_namespaced_secret(
        "db-credentials", namespace, {"data": {"password": garbled}}
    )
    await orchestrator.until(
        lambda: (
            secret(kube_api, namespace, "db-credentials").get("password")
            not in ("\ufffd\ufffd\x00", second)
        ),
        what="a new password after a garbled one",
    )
    third = (await settled(orchestrator, namespace, kube_api))["password"]
    replaced = third != second  # compared apart: a failing assert would print both
    assert replaced, "the garbled password was replaced"


async def test_keys_a_user_removed_or_garbled_are_put_back(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """A Secret edited by hand (keys removed, a key's bytes not text) gets every key
    back with the same password; one emptied of every key gets a whole new one."""
    await create(orchestrator, namespace)
    first = await settled(orchestrator, namespace, kube_api)
    core = k8s.CoreV1Api(kube_api)
    garbled = base64.b64encode(b"\xff\xfe\x00").decode()
    core.patch_namespaced_secret(
        "db-credentials",
        namespace,
        {"data": {"uri": None, "username": None, "host": None, "port": garbled}},
    )

    def whole(before: dict[str, str]) -> dict[str, str] | None:
        now = secret(kube_api, namespace, "db-credentials")
        return now if set(before) <= set(now) and now["port"] == before["port"] else None

    repaired = await orchestrator.until(lambda: whole(first), what="every key back")
    same = repaired == first  # compared apart: a failing assert would print passwords
    assert same, "the repaired Secret differs from the one before the edit"
    assert app_works(kube_api, namespace, first["password"])

    secret_now = core.read_namespaced_secret("db-credentials", namespace)
    secret_now.data = {}
    core.replace_namespaced_secret("db-credentials", namespace, secret_now)
    emptied = await orchestrator.until(lambda: whole(first), what="an emptied Secret refilled")
    assert set(emptied) == set(first)
    await settled(orchestrator, namespace, kube_api)
    renewed = secret(kube_api, namespace, "db-credentials")["password"] != first["password"]
    assert renewed, "an emptied Secret got a new password"
    assert app_works(kube_api, namespace, secret(kube_api, namespace, "db-credentials")["password"])


async def test_deleting_the_app_secret_rotates_the_password(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """Within seconds of deleting the Secret a new one exists; the old password is refused."""
    await create(orchestrator, namespace)
    old = (await settled(orchestrator, namespace, kube_api))["password"]
    k8s.CoreV1Api(kube_api).delete_namespaced_secret("db-credentials", namespace)
    new = (await settled(orchestrator, namespace, kube_api))["password"]
    assert new != old
    assert not app_works(kube_api, namespace, old)


async def test_a_user_session_holding_the_app_role_leaves_the_instance_pending(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """A user's open transaction holds the app role (BEGIN; ALTER ROLE ... left open) while
    dbi must set a new password (the Secret was deleted): the step that sets it waits out
    lock_timeout and the instance is Pending, reason Locked; once the session ends, the
    new password is set and works. The server's log of the failed statement holds the
    password's SCRAM verifier, never the password."""
    await create(orchestrator, namespace)
    app = await settled(orchestrator, namespace, kube_api)
    holder = psycopg.connect(uri(kube_api, namespace, "db"), connect_timeout=3, autocommit=False)
    log = Path(local_stack.state_dir) / "vms" / "logs" / f"{namespace}_db.log"
    try:
        holder.execute(b"ALTER ROLE app PASSWORD 'held-by-an-open-transaction'")
        k8s.CoreV1Api(kube_api).delete_namespaced_secret("db-credentials", namespace)
        locked = ("False", "Locked")
        await orchestrator.until(
            lambda: orchestrator.condition(namespace, "db", "Ready") == locked,
            what="Ready False, reason Locked",
        )
        assert orchestrator.get(namespace, "db")["status"]["phase"] != "Degraded"
    finally:
        holder.rollback()
        holder.close()
    new = (await settled(orchestrator, namespace, kube_api))["password"]
    replaced = new != app["password"]  # compared apart: a failing assert would print both
    assert replaced, "a new password was set"
    assert app_works(kube_api, namespace, new)
    # The server logged dbi's failing ALTER ROLE (lock_timeout): with the verifier only.
    logged = log.read_text()
    assert new not in logged, "the new password is in the server's log"
    assert "canceling statement due to lock timeout" in logged
    assert "PASSWORD 'SCRAM-SHA-256$" in logged


async def _settled_and_read(
    orchestrator: Orchestrator, namespace: str, kube_api: Any
) -> tuple[str, Context, Instance, secrets.Read]:
    """A settled instance's password, then what a step has when it read the app Secret."""
    await create(orchestrator, namespace)
    old = (await settled(orchestrator, namespace, kube_api))["password"]
    ctx = Context(kube=Kube(kube_api), config=Config())
    instance = ctx.kube.instance(namespace, "db")
    assert instance is not None
    return old, ctx, instance, secrets.read(ctx.kube, namespace, "db-credentials")


def _rewrite(ctx: Context, instance: Instance, read: secrets.Read) -> str | None:
    """The credentials step's rewrite of the app Secret with the password it read."""
    return secrets.apply_password(
        ctx.kube,
        instance,
        "db-credentials",
        read,
        lambda pw: {**read.data, "password": pw},
        keep=read.password,
    )


async def test_a_secret_deleted_between_read_and_apply_ends_with_one_new_password(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """The race, made deterministic: an apply naming the read UID after the deletion makes a new
    password once, and the Secret and the role then agree."""
    old, ctx, instance, read = await _settled_and_read(orchestrator, namespace, kube_api)
    k8s.CoreV1Api(kube_api).delete_namespaced_secret(
        "db-credentials", namespace
    )  # ... someone deletes
    written = _rewrite(ctx, instance, read)  # ... and the step applies what it read
    assert written != old
    assert secret(kube_api, namespace, "db-credentials")["password"] == written
    final = (await settled(orchestrator, namespace, kube_api))["password"]
    assert final == written
    assert not app_works(kube_api, namespace, old)


async def test_a_password_a_user_sets_while_a_pass_writes_the_secret_is_kept(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """The race, made deterministic: a step read the Secret, a user then set their own
    password in it, and the step applies what it read. Neither the access step's
    connection keys nor the credentials step's rewrite puts the read password back over
    the user's; the next pass makes the user's password the role's."""
    old, ctx, instance, read = await _settled_and_read(orchestrator, namespace, kube_api)
    chosen = "a-password-the-user-chose-" + secrets.new_password()
    k8s.CoreV1Api(kube_api).patch_namespaced_secret(  # ... the user sets their own ...
        "db-credentials", namespace, {"stringData": {"password": chosen}}
    )
    published = connection.endpoint(ctx, instance)  # ... and the step applies what it read
    ca_pem = read.data.get("ca.crt", "")
    assert not access.complete_secret(ctx, instance, read, published, ca_pem=ca_pem)
    kept = secret(kube_api, namespace, "db-credentials")["password"] == chosen
    assert kept, "the access step put the password it read back over the user's"
    assert _rewrite(ctx, instance, read) is None
    kept = secret(kube_api, namespace, "db-credentials")["password"] == chosen
    assert kept, "the credentials step put the password it read back over the user's"
    await orchestrator.until(
        lambda: app_works(kube_api, namespace, chosen), what="the user's password working"
    )
    assert not app_works(kube_api, namespace, old)


async def test_the_admin_step_acts_on_the_credential_it_observed_or_not_at_all(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str, kube_api: Any
) -> None:
    """The race, made deterministic: the admin step observed the credential, an on-demand
    rotation then changed it, and the step's rotation comes after. Acting on what it
    observed would write the old password back as current (and the guest, refusing it,
    would be reset); the step leaves a credential written since alone."""
    await create(orchestrator, namespace)
    await settled(orchestrator, namespace, kube_api)
    ctx = Context(kube=Kube(kube_api), config=Config())
    instance = ctx.kube.instance(namespace, "db")
    assert instance is not None
    step_input = StepInput(namespace=namespace, name="db", uid=instance.uid)
    observed = await asyncio.to_thread(admin.observe, ctx, instance, step_input)
    assert observed.login is postgres.Login.OK
    before = admin_credential(kube_api, orchestrator, namespace)["password"]
    assert await asyncio.to_thread(rotate_admin, ctx, instance, "between-observe-and-act")
    rotated = admin_credential(kube_api, orchestrator, namespace)
    assert rotated["password"] != before
    await asyncio.to_thread(admin.act, ctx, instance, observed, admin.Action.ROTATE)
    assert admin_credential(kube_api, orchestrator, namespace) == rotated
    app = secret(kube_api, namespace, "db-credentials")
    assert logs_in(address(app), ADMIN_USER, rotated["password"], "postgres")
    # Observed afresh, the same action rotates.
    fresh = await asyncio.to_thread(admin.observe, ctx, instance, step_input)
    await asyncio.to_thread(admin.act, ctx, instance, fresh, admin.Action.ROTATE)
    now = admin_credential(kube_api, orchestrator, namespace)["password"]
    assert now != rotated["password"]
    assert logs_in(address(app), ADMIN_USER, now, "postgres")


async def test_rotate_credentials_through_the_client_and_the_cli(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    local_stack: StackInfo,
) -> None:
    """The update rotates (old refused, new works), from the SDK and the temporal CLI; a retry
    of the same request does not rotate again."""
    await create(orchestrator, namespace)
    old = (await settled(orchestrator, namespace, kube_api))["password"]
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    result = await handle.execute_update(
        "rotate_credentials", id="rotate-1", result_type=RotationResult
    )
    credentials_name = "db-credentials"
    assert result.rotated and result.secret_name == credentials_name
    new = secret(kube_api, namespace, "db-credentials")["password"]
    assert (
        new != old
        and app_works(kube_api, namespace, new)
        and not app_works(kube_api, namespace, old)
    )
    again = await handle.execute_update(
        "rotate_credentials", id="rotate-1", result_type=RotationResult
    )
    assert again.resource_version == result.resource_version
    assert secret(kube_api, namespace, "db-credentials")["password"] == new
    # A retried activity of that request (its id is on the Secret) does not rotate again.
    uid = orchestrator.get(namespace, "db")["metadata"]["uid"]
    retry = RotationRequest(namespace=namespace, name="db", uid=uid, request_id="rotate-1")
    step = RotateCredentials(Context(kube=Kube(kube_api), config=Config()))
    assert not (await asyncio.to_thread(step.run, retry)).rotated
    assert secret(kube_api, namespace, "db-credentials")["password"] == new

    cli = await asyncio.to_thread(
        subprocess.run,
        [
            str(tools.venv_tool("temporal")),
            "workflow",
            "update",
            "execute",
            "--address",
            local_stack.temporal_address,
            "--workflow-id",
            handle.id,
            "--name",
            "rotate_credentials",
            "--output",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert "db-credentials" in cli.stdout
    newest = secret(kube_api, namespace, "db-credentials")["password"]
    assert (
        newest != new
        and app_works(kube_api, namespace, newest)
        and not app_works(kube_api, namespace, new)
    )
    assert newest not in cli.stdout


async def test_no_password_appears_in_history_logs_events_or_status(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Through an instance's life (created, its password rotated by deletion and by
    update, stopped and started, deleted), passwords are only in Secrets: not in its
    workflow's history, Events, status, logs (plain or JSON), span attributes or metrics."""
    caplog.set_level(logging.DEBUG)
    EXPORTER.clear()
    await create(orchestrator, namespace, {**SPEC})
    passwords = {(await settled(orchestrator, namespace, kube_api))["password"]}
    passwords.add(admin_credential(kube_api, orchestrator, namespace)["password"])
    k8s.CoreV1Api(kube_api).delete_namespaced_secret("db-credentials", namespace)
    passwords.add((await settled(orchestrator, namespace, kube_api))["password"])
    handle = orchestrator.client.get_workflow_handle(names.workflow_id(namespace, "db"))
    await handle.execute_update("rotate_credentials", result_type=RotationResult)
    passwords.add(secret(kube_api, namespace, "db-credentials")["password"])
    assert len(passwords) == 4
    # The private keys too: the server's (boot data) and the namespace CA's.
    boot = bootstrap.from_userdata(secret(kube_api, namespace, "db-cloudinit")["userdata"])
    assert boot.server_key is not None
    ca_key = secret(kube_api, Config().namespace, trust.ca_name(namespace))["tls.key"]
    keys = {_key_body(boot.server_key.get_secret_value()), _key_body(ca_key)}
    orchestrator.patch(namespace, "db", {"powerState": "Stopped"})
    await ready(orchestrator, namespace)
    orchestrator.patch(namespace, "db", {"powerState": "Running"})
    await settled(orchestrator, namespace, kube_api)
    status = json.dumps(orchestrator.get(namespace, "db")["status"])
    await asyncio.to_thread(
        orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace, "--timeout=60s"
    )
    assert await asyncio.wait_for(handle.result(), 60) == "deleted"

    history = await every_run(orchestrator.client, handle.id)  # a life spans runs
    assert "teardown_finalizer" in history  # the scan covers the whole life, deletion too
    assert '"rotated":true' in history  # and reads the payloads: the rotation's result
    events = json.dumps(
        k8s.ApiClient().sanitize_for_serialization(
            k8s.CoreV1Api(kube_api).list_namespaced_event(namespace)
        )
    )
    spans = json.dumps(
        [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "events": [dict(e.attributes or {}) for e in s.events],
                "status": s.status.description,
            }
            for s in finished()
        ],
        default=str,
    )
    assert "RunActivity:rotate_credentials" in spans  # the scan covers the rotation's spans
    structured = "\n".join(json_formatter().format(r) for r in caplog.records)
    exposition = generate_latest(REGISTRY).decode()
    for password in passwords | keys:
        for where, text in (
            ("history", history),
            ("events", events),
            ("status", status),
            ("logs", caplog.text),
            ("JSON logs", structured),
            ("span attributes", spans),
            ("metrics", exposition),
        ):
            assert password not in text, f"a password or private key is in the {where}"


def _key_body(pem: str) -> str:
    """A PEM private key's base64, on one line (what a leak of it would contain)."""
    return "".join(line for line in pem.splitlines() if not line.startswith("-----"))[:64]


CREDS = credentials.Observation(
    secret_name="db-credentials",  # noqa: S106 (a Secret's name)
    admin_complete=True,
    app_complete=True,
    cloudinit_matches=True,
)
C = credentials.Action


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(CREDS, "SecretsReady", None, id="complete"),
        pytest.param(
            replace(CREDS, admin_complete=False, cloudinit_matches=False),
            "SecretsWritten",
            C.WRITE,
            id="new-instance-gets-an-admin-credential",
        ),
        pytest.param(
            replace(CREDS, app_complete=False), "SecretsWritten", C.WRITE, id="no-app-password"
        ),
        pytest.param(
            replace(CREDS, cloudinit_matches=False),
            "SecretsWritten",
            C.WRITE,
            id="stale-cloud-init",
        ),
        pytest.param(
            replace(CREDS, ca_exists=False, admin_complete=False, cloudinit_matches=False),
            "CACreated",
            C.CREATE_CA,
            id="the-namespace-ca-comes-before-the-first-boot-data",
        ),
        pytest.param(
            replace(CREDS, certificate_current=False),
            "CertificateIssued",
            C.WRITE,
            id="a-missing-foreign-or-expiring-certificate-is-issued-anew",
        ),
        pytest.param(
            replace(CREDS, kept_follow_policy=False),
            "OwnerReferencesSynced",
            C.WRITE,
            id="cloud-init-owner-reference-differs-from-deletion-policy",
        ),
        pytest.param(
            replace(CREDS, adoptable_admin=True),
            "AdminCredentialAdopted",
            C.ADOPT_ADMIN,
            id="adopted-instances-credential-is-taken-over",
        ),
        pytest.param(
            replace(CREDS, adoption_refused="0d1e"),
            "AdoptionRefused",
            None,
            id="a-credential-the-instance-may-not-adopt-stalls-it",
        ),
        pytest.param(
            replace(CREDS, adoption_refused="0d1e", admin_complete=False, data_disk_exists=True),
            "AdoptionRefused",
            None,
            id="a-refused-adoption-resets-nothing-either",
        ),
        pytest.param(
            replace(CREDS, admin_complete=False, data_disk_exists=True),
            "AdminCredentialReset",
            C.RESET_ADMIN,
            id="lost-credential-is-reset-never-regenerated-blindly",
        ),
        pytest.param(
            replace(CREDS, restore_delivered=False),
            "RestoreDelivered",
            C.WRITE,
            id="a-restore-is-written-into-the-boot-data",
        ),
        pytest.param(
            replace(CREDS, restore_cleared=False),
            "RestoreCleared",
            C.WRITE,
            id="a-restored-instance-no-longer-carries-where-its-backup-is",
        ),
        pytest.param(
            replace(CREDS, restore_delivered=False, restore_invalid="spec.restore.from.backup"),
            "RestoreSourceInvalid",
            None,
            id="a-restore-whose-backup-is-unusable-stalls",
        ),
    ],
)
def test_credentials(obs: credentials.Observation, reason: str, action: credentials.Action) -> None:
    """Satisfied only when every credential is complete; a missing admin credential is
    adopted or reset when data exists, and made anew only for a new instance; an adoption
    dbi may not carry out stalls the instance, naming the UID."""
    name = "db-credentials"
    decided = credentials.decide(replace(obs, secret_name=name))
    decision, act = decided.result, decided.action
    assert (decision.reason, act) == (reason, action)
    if decision.outcome is Outcome.SATISFIED:
        assert decision.facts.credentials_secret_name == name
    elif reason in ("RestoreSourceInvalid", "AdoptionRefused"):  # no action helps
        assert decision.outcome is Outcome.TERMINAL
        if obs.adoption_refused is not None:
            assert obs.adoption_refused in decision.message
    else:
        assert decision.outcome is Outcome.PENDING


class _OneSecret:
    """Answers ``Kube.secret`` with one Secret holding ``data`` (base64, as the API)."""

    def __init__(self, data: dict[str, bytes]) -> None:
        self.data: dict[str, bytes | str] = {
            k: base64.b64encode(v).decode() for k, v in data.items()
        }

    def secret(self, namespace: str, name: str) -> k8s.V1Secret:
        return k8s.V1Secret(metadata=k8s.V1ObjectMeta(name=name, uid="u"), data=self.data)

    @property
    def api(self) -> k8s.ApiClient:
        return k8s.ApiClient()


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b"\xff\xfe not utf-8", id="not-utf-8"),
        pytest.param(b"pass\x00word", id="nul"),
        pytest.param(b"", id="emptied"),
    ],
)
def test_a_password_a_user_made_unusable_reads_as_missing(value: bytes) -> None:
    """A password edited into bytes no password may hold reads as empty, which the step
    repairs like a missing one (never a step failing on every pass); other keys stay."""
    kube = cast(Kube, _OneSecret({"password": value, "username": b"app"}))
    read = secrets.read(kube, "shop", "db-credentials")
    assert read.password == ""
    assert read.data["username"] == "app"


def test_no_repr_shows_a_password_a_key_or_a_signed_url() -> None:
    """What the credentials step reads and observes prints its UIDs and keys' names, never
    a password, a private key, a Secret's last-applied copy or a presigned URL: a repr
    reaches logs and exception messages."""
    password, applied = "pw-" + "x" * 20, "last-applied-" + "y" * 20
    url = "https://store.example/base.tar.gz?X-Amz-Signature=" + "z" * 20
    ca = tls.new_ca("shop")
    app = secrets.Read(
        uid="a",
        data={"password": password, "username": "app"},
        annotations={"kubectl.kubernetes.io/last-applied-configuration": applied},
        meta={"annotations": {"kubectl.kubernetes.io/last-applied-configuration": applied}},
    )
    admin = Credential(uid="c", data={"password": password, "next": password}, annotations={})
    reads = credentials.Reads(
        admin=admin,
        app=app,
        cloudinit=secrets.NONE,
        ca=ca,
        app_name="db-credentials",
        cloudinit_name="db-cloudinit",
        restore=bootstrap.Restore(backup="db-1", base_url=url, wal_url=url),
        adopted=admin,
    )
    observed = replace(CREDS, versions=reads.versions(), children=tuple(reads.children()))
    shown = repr(reads) + repr(observed)
    for held in (password, applied, url, ca.key_pem.splitlines()[1]):
        assert held not in shown
    assert "db-1" in shown and "'password'" in shown  # what it is, not what it holds
    assert "db-credentials" in repr(observed)
