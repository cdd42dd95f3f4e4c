"""The worker's views (``activities.infra.views``) against the real API server: an idle pass's
read of an unchanged object asks the server nothing, a changed one is read again,
Secrets and what the views do not hold always go to the server, and an idle pass that
would act runs again on fresh reads before it writes anything."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from kubernetes import client as k8s
from temporalio.testing import ActivityEnvironment

from activities.infra import admin_credential, secrets, trust
from activities.infra.context import Context
from activities.infra.reads import Spared, Stale, confirm_fresh, shared_reads
from activities.infra.views import ANSWERS_PER_WORKFLOW, View, Views, target
from activities.steps import credentials
from activities.steps.loop import Anatomy
from activities.steps.loop import run as run_step
from activities.worker.instance import LoadInstance
from activities.worker.passes import Passes
from dbi import connect, names, pipeline
from dbi.config import Config
from dbi.kinds import VIEWED, Kind
from dbi.steps import Decision, Outcome, StepInput, StepResult, StepsInput, StepsResult
from tests.activities.conftest import Counted
from tests.activities.notes import (
    SPEC,
    create_instance,
    idle_read,
    labels,
    note,
    note_step,
    service,
)
from tests.polling import eventually

pytestmark = pytest.mark.stack

LABEL = {names.INSTANCE_LABEL: "db"}
RUN_ONE_FIRST = "run-1/1"  # the id of a pass
CREDENTIALS = pipeline.CREDENTIALS.name


def test_an_idle_read_of_an_unchanged_object_asks_nothing_and_a_changed_one_asks_again(
    counted: Counted, kube_api: Any, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service(namespace, service(namespace, "db", LABEL))
    with shared_reads():  # a fresh pass: the server's answer, kept
        assert note(counted.kube.service(namespace, "db")) == "1"
    # Once the view has the object at the version read, idle reads ask nothing.
    eventually(lambda: idle_read(counted, namespace, "db")[1] == 0, what="an idle read from views")
    found, asked = idle_read(counted, namespace, "db")
    assert (note(found), asked) == ("1", 0)
    # Someone changes it: an idle read sees the change (from the server) once the
    # view does, and asks nothing again after that.
    core.patch_namespaced_service("db", namespace, {"metadata": {"annotations": {"note": "2"}}})
    eventually(lambda: note(idle_read(counted, namespace, "db")[0]) == "2", what="the change")
    found, asked = idle_read(counted, namespace, "db")
    assert (note(found), asked) == ("2", 0)
    # A pass that is not idle always asks.
    with shared_reads():
        _, asked = counted.asked(lambda: counted.kube.service(namespace, "db"))
    assert asked == 1
    # Deleted: the view no longer has it, and the read goes to the server (a 404).
    core.delete_namespaced_service("db", namespace)
    eventually(lambda: idle_read(counted, namespace, "db")[0] is None, what="the deletion")
    assert idle_read(counted, namespace, "db") == (None, 1)


def test_secrets_and_objects_without_the_instance_label_always_go_to_the_server(
    counted: Counted, views: Views, kube_api: Any, namespace: str
) -> None:
    """Idle reads of both ask the server, each time, and no answer of theirs takes a
    place among those kept (no view vouches for one: keeping it would only push out an
    answer that serves)."""
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service(namespace, service(namespace, "other", {}))
    core.create_namespaced_secret(
        namespace,
        k8s.V1Secret(metadata=k8s.V1ObjectMeta(name="db", labels=LABEL), string_data={"v": "1"}),
    )
    for _ in range(3):
        with shared_reads(idle=True):
            _, asked = counted.asked(lambda: counted.kube.service(namespace, "other"))
            assert asked == 1
            _, asked = counted.asked(lambda: counted.kube.secret(namespace, "db"))
            assert asked == 1
    assert views.kept == 0


def test_a_list_by_label_is_answered_while_every_object_it_matches_is_unchanged(
    counted: Counted, kube_api: Any, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_api)
    root = {**LABEL, "dbi.dev/disk": "root"}

    def claim(name: str) -> None:
        core.create_namespaced_persistent_volume_claim(
            namespace,
            k8s.V1PersistentVolumeClaim(
                metadata=k8s.V1ObjectMeta(name=name, labels=root),
                spec=k8s.V1PersistentVolumeClaimSpec(
                    access_modes=["ReadWriteOnce"],
                    resources=k8s.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
                ),
            ),
        )

    def names_listed() -> tuple[list[str], int]:
        def read() -> list[str]:
            with shared_reads(idle=True):
                return sorted(
                    str(c.metadata and c.metadata.name) for c in counted.kube.pvcs(namespace, root)
                )

        return counted.asked(read)

    claim("db-root-a")
    eventually(lambda: names_listed() == (["db-root-a"], 0), what="a list from views")
    claim("db-root-b")
    eventually(lambda: names_listed()[0] == ["db-root-a", "db-root-b"], what="the new claim")
    assert names_listed() == (["db-root-a", "db-root-b"], 0)


def test_an_idle_block_that_would_write_raises_stale_and_writes_nothing(
    counted: Counted, kube_api: Any, namespace: str
) -> None:
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service(namespace, service(namespace, "db", LABEL))
    with shared_reads():
        counted.kube.service(namespace, "db")
    eventually(lambda: idle_read(counted, namespace, "db")[1] == 0, what="an idle read from views")
    with pytest.raises(Stale), shared_reads(idle=True):
        counted.kube.service(namespace, "db")
        counted.kube.patch("Service", namespace, "db", {"metadata": {"labels": {"x": "y"}}})
    assert "x" not in labels(core, namespace)
    # An idle block whose reads all came from the server writes as any block does.
    with shared_reads(idle=True):
        counted.kube.secret(namespace, "absent")
        counted.kube.patch("Service", namespace, "db", {"metadata": {"labels": {"x": "y"}}})
    assert labels(core, namespace).get("x") == "y"


def test_an_idle_pass_that_would_act_on_a_lagging_view_runs_again_on_fresh_reads(
    counted: Counted, views: Views, kube_api: Any, namespace: str
) -> None:
    """The view lags the server (as a watch may, for an event's latency): an idle
    pass's step decides from the view's answer that it must act; before it writes,
    the pass runs again on fresh reads, which show there is nothing to do."""
    core = k8s.CoreV1Api(kube_api)
    core.create_namespaced_service(namespace, service(namespace, "db", LABEL, note="act"))
    uid = create_instance(kube_api, namespace)
    with shared_reads():
        counted.kube.service(namespace, "db")
    eventually(lambda: idle_read(counted, namespace, "db")[1] == 0, what="an idle read from views")
    (view,) = [v for v in views.views if v.kind.name == "Service"]
    lagging = {ns: dict(found) for ns, found in view.objects.items()}
    core.patch_namespaced_service("db", namespace, {"metadata": {"annotations": {"note": "done"}}})
    eventually(lambda: view.objects != lagging, what="the view saw the change")
    view.objects = lagging  # as if the event had not come yet
    assert note(idle_read(counted, namespace, "db")[0]) == "act"

    acted: list[str] = []
    step = note_step(namespace, acted)
    ctx = Context(kube=counted.kube, config=Config())
    steps = {SPEC.name: lambda one: run_step(ctx, step, one)}
    one = StepInput(namespace=namespace, name="db", uid=uid, idle=True)
    result = ActivityEnvironment().run(
        Passes(ctx, steps).run_steps, StepsInput(steps=(SPEC.name,), step_input=one)
    )
    assert acted == []
    assert [(r.outcome, r.reason) for r in result.results] == [(Outcome.SATISFIED, "Done")]


def test_a_step_acting_on_an_instance_its_idle_load_read_from_views_reads_it_afresh(
    counted: Counted, kube_api: Any, namespace: str
) -> None:
    """An idle pass's load reads the DBInstance from the views; a step that would act
    on that read alone (nothing else read in its block) still acts on a fresh one."""
    uid = create_instance(kube_api, namespace)
    ctx = Context(kube=counted.kube, config=Config())
    load = LoadInstance(ctx).run
    with shared_reads():  # a fresh pass: the server's answer, kept
        counted.kube.instance(namespace, "db")

    def idle_load(pass_id: str) -> int:
        one = StepInput(namespace=namespace, name="db", uid=uid, idle=True, pass_id=pass_id)
        return counted.asked(lambda: ActivityEnvironment().run(load, one))[1]

    eventually(lambda: idle_load("probe") == 0, what="an idle load from views")
    assert idle_load(RUN_ONE_FIRST) == 0
    acted: list[str] = []
    step = Anatomy(
        SPEC,
        lambda ctx, instance, step_input: instance.uid,
        lambda seen: Decision(SPEC.result(Outcome.PENDING, "Acting", "acting"), "act"),
        lambda ctx, instance, seen, action: acted.append(seen),
    )
    steps = {SPEC.name: lambda one: run_step(ctx, step, one)}
    one = StepInput(namespace=namespace, name="db", uid=uid, idle=True, pass_id=RUN_ONE_FIRST)
    before = len(counted.sent)
    given = StepsInput(steps=(SPEC.name,), step_input=one)
    ActivityEnvironment().run(Passes(ctx, steps).run_steps, given)
    assert acted == [uid]
    assert any("dbinstances" in path for _, path in counted.sent[before:]), counted.sent[before:]


def credentials_pass(counted: Counted, namespace: str, uid: str, *, idle: bool) -> StepResult:
    """One pass of the credentials step alone (dbi's namespace: the test's)."""
    ctx = Context(kube=counted.kube, config=Config(namespace=namespace))
    steps = {CREDENTIALS: lambda one: run_step(ctx, credentials.STEP, one)}
    one = StepInput(namespace=namespace, name="db", uid=uid, idle=idle)
    given = StepsInput(steps=(CREDENTIALS,), step_input=one)
    result: StepsResult = ActivityEnvironment().run(Passes(ctx, steps).run_steps, given)
    return result.results[0]


def settle_credentials(counted: Counted, namespace: str, uid: str) -> None:
    for _ in range(8):
        if credentials_pass(counted, namespace, uid, idle=False).outcome is Outcome.SATISFIED:
            return
    raise AssertionError("the credentials step did not settle")


def secrets_read(counted: Counted, since: int) -> list[str]:
    return [p.rsplit("/", 1)[-1] for m, p in counted.sent[since:] if "/secrets/" in p]


def test_an_idle_pass_takes_the_recent_ca(counted: Counted, kube_api: Any, namespace: str) -> None:
    """A fresh pass reads the namespace's CA; an idle one a moment later does not (the CA
    this process read under a minute ago stands), and still finds everything in place."""
    uid = create_instance(kube_api, namespace)
    settle_credentials(counted, namespace, uid)
    ca = trust.ca_name(namespace)
    before = len(counted.sent)
    assert credentials_pass(counted, namespace, uid, idle=False).outcome is Outcome.SATISFIED
    assert ca in secrets_read(counted, before)
    before = len(counted.sent)
    result = credentials_pass(counted, namespace, uid, idle=True)
    assert (result.outcome, result.reason) == (Outcome.SATISFIED, credentials.Reason.READY)
    assert ca not in secrets_read(counted, before), counted.sent[before:]


def test_an_idle_pass_that_would_act_on_the_recent_ca_runs_again_with_it_read(
    local_stack: Any, kube_api: Any, namespace: str, dbinstance_crd: str
) -> None:
    """The admin credential gone: an idle pass, which takes the CA from this process's
    recent read, would write a new one; it runs again with every read made (the CA read
    from the server) before it writes. No views at all here: the spared read alone must
    send the pass back."""
    counted = Counted(local_stack, None)
    uid = create_instance(kube_api, namespace)
    settle_credentials(counted, namespace, uid)
    core = k8s.CoreV1Api(kube_api)
    home = admin_credential.name_for(uid)
    before_password = core.read_namespaced_secret(home, namespace).data or {}
    core.delete_namespaced_secret(home, namespace)
    before = len(counted.sent)
    assert credentials_pass(counted, namespace, uid, idle=True).outcome is Outcome.SATISFIED
    assert trust.ca_name(namespace) in secrets_read(counted, before), counted.sent[before:]
    written = core.read_namespaced_secret(home, namespace).data or {}
    assert written.get("password") and written != before_password


def test_an_idle_pass_takes_the_boot_data_this_worker_read_and_reads_the_passwords(
    counted: Counted, views: Views, namespace: str, kube_api: Any
) -> None:
    """An idle pass reads the two Secrets that hold passwords (the admin credential, the
    app's) from the server and takes the cloud-init Secret from this worker's read of
    it; once that read is older than the bound, the idle pass reads it again."""
    uid = create_instance(kube_api, namespace)
    settle_credentials(counted, namespace, uid)
    before = len(counted.sent)
    result = credentials_pass(counted, namespace, uid, idle=True)
    assert (result.outcome, result.reason) == (Outcome.SATISFIED, credentials.Reason.READY)
    read = secrets_read(counted, before)
    assert sorted(read) == sorted([admin_credential.name_for(uid), "db-credentials"]), read
    views.spared = Spared(4, seconds=0.0)
    settle_credentials(counted, namespace, uid)
    before = len(counted.sent)
    assert credentials_pass(counted, namespace, uid, idle=True).outcome is Outcome.SATISFIED
    assert "db-cloudinit" in secrets_read(counted, before)


def test_an_idle_read_of_the_kept_boot_data_sends_an_acting_pass_back_for_a_fresh_one(
    counted: Counted, namespace: str, kube_api: Any
) -> None:
    """A read the idle block took from what this worker kept counts as one the views
    answered: a step that would act on it raises Stale. A write of the Secret by this
    worker drops what it kept: the next idle read goes to the server."""
    uid = create_instance(kube_api, namespace)
    settle_credentials(counted, namespace, uid)
    instance = counted.kube.instance(namespace, "db")
    assert instance is not None and instance.uid == uid
    with shared_reads(idle=True):
        before = len(counted.sent)
        kept = secrets.read_boot(counted.kube, instance)
        assert kept.uid is not None and "db-cloudinit" not in secrets_read(counted, before)
        with pytest.raises(Stale):
            confirm_fresh()
    secrets.apply(counted.kube, instance, "db-cloudinit", kept.data, read=kept.uid_only())
    with shared_reads(idle=True):
        before = len(counted.sent)
        assert secrets.read_boot(counted.kube, instance).uid == kept.uid
        assert "db-cloudinit" in secrets_read(counted, before)


def test_an_idle_pass_on_boot_data_another_worker_rewrote_writes_nothing(
    local_stack: Any, counted: Counted, namespace: str, kube_api: Any
) -> None:
    """Another worker rotated the admin password and rewrote the boot data; this worker
    still keeps the old boot data. Its idle pass, which would rewrite the boot data on
    what it kept, runs again on fresh reads: Satisfied, nothing written, and what it
    keeps now is the new boot data."""
    uid = create_instance(kube_api, namespace)
    settle_credentials(counted, namespace, uid)
    other = Counted(local_stack, Views.of(frozenset({namespace}), [], cached_workflows=4))
    instance = other.kube.instance(namespace, "db")
    assert instance is not None
    admin_credential.create(other.kube, namespace, instance, secrets.new_password())
    settle_credentials(other, namespace, uid)
    core = k8s.CoreV1Api(kube_api)
    rewritten = core.read_namespaced_secret("db-cloudinit", namespace).metadata
    assert rewritten is not None
    before = len(counted.sent)
    result = credentials_pass(counted, namespace, uid, idle=True)
    assert (result.outcome, result.reason) == (Outcome.SATISFIED, credentials.Reason.READY)
    written = [(m, p) for m, p in counted.sent[before:] if m != "GET"]
    assert written == [], written
    assert "db-cloudinit" in secrets_read(counted, before)
    now = core.read_namespaced_secret("db-cloudinit", namespace).metadata
    assert now is not None and now.resource_version == rewritten.resource_version
    before = len(counted.sent)
    assert credentials_pass(counted, namespace, uid, idle=True).outcome is Outcome.SATISFIED
    assert "db-cloudinit" not in secrets_read(counted, before)


def test_a_kind_the_server_refuses_to_list_is_read_from_the_server(
    local_stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "dbi.streams")
    missing = Kind("Nothing", "apis/example.dev/v1/nothings")
    refused = Views([View(missing)], answers=4)
    refused.start(connect.kubernetes(str(local_stack.kubeconfig)))
    try:
        eventually(lambda: "cannot list Nothing (404" in caplog.text, what="the warning")
        assert not refused.views[0].live
        url = "https://h/apis/example.dev/v1/namespaces/a/nothings/b"
        assert refused.answer(url, "application/json") is None
    finally:
        refused.stop()


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://h:6443/api/v1/namespaces/a/services/b", ("api/v1/services", "a", "b")),
        (
            "https://h/apis/kubevirt.io/v1/namespaces/a/virtualmachines/b",
            ("apis/kubevirt.io/v1/virtualmachines", "a", "b"),
        ),
        ("https://h/api/v1/persistentvolumes/pv-1", ("api/v1/persistentvolumes", None, "pv-1")),
        (
            "https://h/api/v1/namespaces/a/persistentvolumeclaims",
            ("api/v1/persistentvolumeclaims", "a", None),
        ),
        (
            "https://rancher/k8s/clusters/c-1/api/v1/namespaces/a/services/b",
            ("api/v1/services", "a", "b"),
        ),
        ("https://h/api/v1/namespaces/a/services/b/status", None),
        ("https://h/apis/kubevirt.io/v1/namespaces/a/virtualmachines/b/restart", None),
        ("https://h/version", None),
    ],
)
def test_a_url_names_the_collection_namespace_and_object(
    url: str, found: tuple[str, str | None, str | None] | None
) -> None:
    got = target(url)
    assert (None if got is None else (got.path, got.namespace, got.name)) == found


def test_a_list_is_answered_only_in_one_namespace_and_by_equality_selectors() -> None:
    """Plain data: a live view of claims, an answer kept for each list; only the
    namespaced list by an equality selector that includes the instance label holds
    (an empty list across namespaces must not pass for an empty namespace)."""
    (claims,) = [k for k in VIEWED if k.name == "PersistentVolumeClaim"]
    view = View(claims)
    view.state.listed()
    view.objects = {"a": {"db-root": ("7", {**LABEL, "disk": "root"})}}
    views = Views([view], answers=8)
    base = "https://h/api/v1"
    label = "dbi.dev%2Finstance%3Ddb"

    class Answer:
        status = 200

        def __init__(self, body: dict[str, Any]) -> None:
            self.data = json.dumps(body).encode()

    one: dict[str, Any] = {"items": [{"metadata": {"name": "db-root", "resourceVersion": "7"}}]}
    cases: dict[str, tuple[dict[str, Any], bool]] = {
        f"{base}/namespaces/a/persistentvolumeclaims?labelSelector={label}": (one, True),
        f"{base}/persistentvolumeclaims?labelSelector={label}": ({"items": []}, False),
        f"{base}/namespaces/a/persistentvolumeclaims?labelSelector=disk%3Droot": (one, False),
        f"{base}/namespaces/a/persistentvolumeclaims?labelSelector={label}&limit=5": (one, False),
        f"{base}/namespaces/a/persistentvolumeclaims?labelSelector=dbi.dev%2Finstance": (
            one,
            False,
        ),
    }
    for url, (body, _) in cases.items():
        views.remember(url, "", Answer(body))
    assert {url: views.answer(url, "") is not None for url in cases} == {
        url: answered for url, (_, answered) in cases.items()
    }


def test_every_kind_viewed_is_one_an_idle_pass_reads_and_never_a_secret() -> None:
    assert "secrets" not in {k.path.rsplit("/", 1)[-1] for k in VIEWED}


def test_what_a_status_write_answered_is_the_objects_idle_read_with_nothing_asked(
    counted: Counted, views: Views, kube_api: Any, namespace: str
) -> None:
    """A pass's own status write (through the worker's client, outside any pass's reads)
    keeps what the server answered, the instance as written, as its read: once the view
    has that version, an idle read of the instance asks the server nothing. Without it,
    the first idle read after each status write asked for the instance again."""
    create_instance(kube_api, namespace)
    (view,) = [v for v in views.views if v.kind.name == "DBInstance"]
    written = counted.kube.objects.patch_namespaced_custom_object_status(
        names.GROUP, names.VERSION, namespace, names.PLURAL, "db", {"status": {"phase": "Starting"}}
    )
    version = written["metadata"]["resourceVersion"]  # type: ignore[index]
    eventually(lambda: view.version(namespace, "db") == version, what="the view at the write")

    def read() -> Any:
        with shared_reads(idle=True):
            return counted.kube.instance(namespace, "db")

    found, asked = counted.asked(read)
    assert (found.model.status.phase, asked) == ("Starting", 0)


def test_answers_and_spared_reads_are_kept_for_every_instance_served_not_only_the_cached() -> None:
    """Plain data: a worker whose workflow cache (DBI_CACHED_WORKFLOWS, here 1) is smaller
    than its fleet still re-checks every instance; were the answers sized by the cache,
    each re-check past the first would ask the server again."""
    (instances,) = [k for k in VIEWED if k.name == "DBInstance"]
    (services,) = [k for k in VIEWED if k.name == "Service"]
    held, service_view = View(instances), View(services)
    for view in (held, service_view):
        view.state.listed()
    views = Views([held, service_view], answers=1, spared=1)
    names_ = [f"db{i}" for i in range(40)]
    held.objects = {"a": {name: ("1", {}) for name in names_}}
    service_view.objects = {"a": {name: ("5", LABEL) for name in names_}}

    class Answer:
        status = 200
        data = json.dumps({"metadata": {"resourceVersion": "5", "labels": LABEL}}).encode()

    urls = [f"https://h/api/v1/namespaces/a/services/{name}" for name in names_]
    for url in urls:
        views.remember(url, "", Answer())
        views.spared.put(url, "boot data")
    assert views.served() == 40
    assert all(views.answer(url, "") is not None for url in urls)
    assert all(views.spared.get(url) == "boot data" for url in urls)
    # The fleet shrinks: the oldest go, down to what the rest call for.
    held.objects = {"a": {"db0": ("1", {})}}
    views.remember(urls[0], "", Answer())
    views.spared.put(urls[0], "boot data")
    assert views.kept == ANSWERS_PER_WORKFLOW and len(views.spared) == 1
