"""Which object with a child's name is the instance's, and what a step does about the
others: plain data, then on the real stack."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

from activities.infra import ownership
from dbi import names, pipeline
from dbi.steps import Outcome
from tests.activities.lifecycle import SPEC
from tests.activities.owned import OLD, UID, instance
from tests.orchestrator import Orchestrator
from watcher.watcher import Watcher

DBI_OWNER = {"apiVersion": "dbi.dev/v1alpha1", "kind": "DBInstance", "uid": UID}


def meta(*, owners: list[dict[str, Any]] | None = None, uid: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"name": "db-data", "labels": {names.INSTANCE_LABEL: "db"}}
    if owners is not None:
        found["ownerReferences"] = owners
    if uid is not None:
        found["annotations"] = {names.INSTANCE_UID_ANNOTATION: uid}
    return found


@pytest.mark.parametrize(
    ("found", "claim"),
    [
        pytest.param(None, ownership.Claim.ABSENT, id="absent"),
        pytest.param(meta(owners=[DBI_OWNER]), ownership.Claim.OURS, id="owner-reference"),
        pytest.param(meta(uid=UID), ownership.Claim.OURS, id="uid-annotation-no-owner"),
        pytest.param(
            meta(owners=[{**DBI_OWNER, "uid": OLD}], uid=OLD),
            ownership.Claim.LEFT_BEHIND,
            id="owned-by-a-deleted-instance",
        ),
        pytest.param(
            {**meta(uid=OLD), "deletionTimestamp": "2026-12-01T00:00:00Z"},
            ownership.Claim.LEFT_BEHIND,
            id="being-deleted",
        ),
        pytest.param(meta(uid=OLD), ownership.Claim.RETAINED, id="retained-by-a-deleted-instance"),
        pytest.param(meta(), ownership.Claim.FOREIGN, id="label-alone-proves-nothing"),
        pytest.param({"name": "db-data"}, ownership.Claim.FOREIGN, id="a-users-own-object"),
        pytest.param(
            meta(owners=[{"apiVersion": "apps/v1", "kind": "Deployment", "uid": "x"}], uid=OLD),
            ownership.Claim.FOREIGN,
            id="another-controllers-child",
        ),
    ],
)
def test_classify(found: dict[str, Any] | None, claim: ownership.Claim) -> None:
    """An object is the instance's by its owner reference or UID annotation, and nothing else."""
    child = ownership.Child("PersistentVolumeClaim", "db-data", found)
    assert ownership.classify(child, UID) is claim


@pytest.mark.parametrize(
    ("claim", "adopt", "outcome", "reason", "take"),
    [
        pytest.param(
            ownership.Claim.FOREIGN, None, Outcome.TERMINAL, "ForeignObject", False, id="foreign"
        ),
        pytest.param(
            ownership.Claim.FOREIGN,
            OLD,
            Outcome.TERMINAL,
            "ForeignObject",
            False,
            id="foreign-never-adopted",
        ),
        pytest.param(
            ownership.Claim.RETAINED,
            None,
            Outcome.TERMINAL,
            "RetainedObject",
            False,
            id="retained-not-named",
        ),
        pytest.param(
            ownership.Claim.RETAINED,
            "uid-other",
            Outcome.TERMINAL,
            "RetainedObject",
            False,
            id="retained-another-named",
        ),
        pytest.param(
            ownership.Claim.RETAINED, OLD, Outcome.PENDING, "Adopted", True, id="retained-named"
        ),
        pytest.param(
            ownership.Claim.LEFT_BEHIND,
            None,
            Outcome.PENDING,
            "ObjectBeingDeleted",
            False,
            id="left-behind-waits",
        ),
    ],
)
def test_refusal(
    claim: ownership.Claim, adopt: str | None, outcome: Outcome, reason: str, take: bool
) -> None:
    """Foreign objects stop the step; retained ones too unless the instance names their
    UID in dbi.dev/adopt; left-behind ones are waited for. The message names the object."""
    child = ownership.Child("PersistentVolumeClaim", "db-data", meta(uid=OLD))
    adopter = instance(adopt=adopt)
    decided = ownership.refusal(pipeline.VM, adopter, child, claim)
    decision, adopted = decided.result, decided.action is not None
    assert (decision.outcome, decision.reason, adopted) == (outcome, reason, take)
    assert "PersistentVolumeClaim db-data" in decision.message
    if reason == "RetainedObject":
        assert f"{names.ADOPT_ANNOTATION}={OLD}" in decision.message


def test_an_object_another_live_instance_owns_is_foreign_naming_it() -> None:
    """A child's name held by an object another DBInstance owns and that instance exists
    (its spec.credentials.secretName is this one's Secret, say): never waited for as if
    its owner were deleted; the step stops, naming the owner."""
    child = ownership.Child("Secret", "db-credentials", meta(owners=[DBI_OWNER]))
    decided = ownership.refusal(
        pipeline.CREDENTIALS, instance(), child, ownership.Claim.LEFT_BEHIND, live_owner="x"
    )
    assert (decided.result.outcome, decided.result.reason) == (Outcome.TERMINAL, "ForeignObject")
    assert "DBInstance x" in decided.result.message and decided.action is None


@pytest.mark.parametrize(
    ("policy", "owners", "follows"),
    [
        pytest.param("Delete", [DBI_OWNER], True, id="delete-owned"),
        pytest.param("Delete", [], False, id="delete-not-owned"),
        pytest.param("Retain", [], True, id="retain-not-owned"),
        pytest.param("Retain", [DBI_OWNER], False, id="retain-owned"),
    ],
)
def test_kept_children_are_owned_exactly_under_delete(
    policy: str, owners: list[dict[str, Any]], follows: bool
) -> None:
    """What Retain keeps has no owner reference under Retain, the instance's under Delete."""
    child = ownership.Child("Secret", "db-admin", meta(owners=owners, uid=UID))
    assert ownership.follows_policy(child, instance(policy=policy)) is follows


@pytest.mark.parametrize(
    ("policy", "kept", "owned"),
    [
        pytest.param("Delete", True, True, id="delete-kept"),
        pytest.param("Retain", True, False, id="retain-kept"),
        pytest.param("Retain", False, True, id="retain-not-kept"),
    ],
)
def test_child_metadata_marks_every_child_and_owns_what_retain_does_not_keep(
    policy: str, kept: bool, owned: bool
) -> None:
    """Every child carries the instance label and UID; an owner reference unless Retain
    keeps it."""
    found = instance(policy=policy).child_metadata("db-data", kept=kept)
    assert found["labels"] == {names.INSTANCE_LABEL: "db"}
    assert found["annotations"][names.INSTANCE_UID_ANNOTATION] == UID
    assert ("ownerReferences" in found) is owned


def _foreign_secret(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_secret(
        namespace,
        k8s.V1Secret(
            metadata=k8s.V1ObjectMeta(name="db-credentials"),
            string_data={"password": "a-users-own-value"},
        ),
    )


def _foreign_claim(core: k8s.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_persistent_volume_claim(
        namespace,
        k8s.V1PersistentVolumeClaim(
            metadata=k8s.V1ObjectMeta(name="db-data", labels={names.INSTANCE_LABEL: "db"}),
            spec=k8s.V1PersistentVolumeClaimSpec(
                access_modes=["ReadWriteOnce"],
                resources=k8s.V1VolumeResourceRequirements(requests={"storage": "1Gi"}),
            ),
        ),
    )


def _foreign_vm(core: k8s.CoreV1Api, namespace: str) -> None:
    vm = {
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "db"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}},
    }
    k8s.CustomObjectsApi(core.api_client).create_namespaced_custom_object(
        "kubevirt.io", "v1", namespace, "virtualmachines", vm
    )


def _writers(core: k8s.CoreV1Api, namespace: str, kind: str) -> set[str]:
    """Return the field managers that ever wrote the object (it must exist)."""
    if kind == "Secret":
        found: Any = core.read_namespaced_secret("db-credentials", namespace)
    elif kind == "PersistentVolumeClaim":
        found = core.read_namespaced_persistent_volume_claim("db-data", namespace)
    else:
        found = k8s.CustomObjectsApi(core.api_client).get_namespaced_custom_object(
            "kubevirt.io", "v1", namespace, "virtualmachines", "db"
        )
        return {f["manager"] for f in found["metadata"].get("managedFields") or []}
    return {f.manager for f in found.metadata.managed_fields or []}


@pytest.mark.stack
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            ("Secret", _foreign_secret, "CredentialsReady", "Secret db-credentials"), id="secret"
        ),
        pytest.param(
            ("VirtualMachine", _foreign_vm, "VMProvisioned", "VirtualMachine db"), id="vm"
        ),
        pytest.param(
            (
                "PersistentVolumeClaim",
                _foreign_claim,
                "VMProvisioned",
                "PersistentVolumeClaim db-data",
            ),
            id="data-claim",
        ),
    ],
)
async def test_an_object_dbi_did_not_create_is_never_touched(
    orchestrator: Orchestrator,
    watcher: Watcher,
    namespace: str,
    kube_api: Any,
    case: tuple[str, Callable[[k8s.CoreV1Api, str], None], str, str],
) -> None:
    """A Secret, VM or data claim that holds a child's name but is not the instance's
    stalls the instance with ForeignObject naming it; neither the passes nor the
    instance's deletion write or delete it."""
    kind, make, condition, named = case
    core = k8s.CoreV1Api(kube_api)
    make(core, namespace)
    orchestrator.apply(namespace, "db", SPEC)
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", condition) == ("False", "ForeignObject"),
        what=f"{condition} False ForeignObject",
    )
    assert orchestrator.condition(namespace, "db", "Stalled") == ("True", "ForeignObject")
    conditions = orchestrator.get(namespace, "db")["status"]["conditions"]
    assert named in next(c["message"] for c in conditions if c["type"] == condition)

    await asyncio.to_thread(
        orchestrator.kubectl, "delete", "dbinstance", "db", "-n", namespace, "--timeout=60s"
    )
    assert names.FIELD_MANAGER not in _writers(core, namespace, kind)


async def test_a_secret_another_live_instance_owns_stalls_naming_it(
    orchestrator: Orchestrator, watcher: Watcher, namespace: str
) -> None:
    """Instance x names db's Secret as its own (spec.credentials.secretName); db then
    stalls with ForeignObject naming x, instead of waiting for x's Secret to go."""
    orchestrator.apply(namespace, "x", {**SPEC, "credentials": {"secretName": "db-credentials"}})
    await orchestrator.until(
        lambda: (
            orchestrator.condition(namespace, "x", "CredentialsReady") == ("True", "SecretsReady")
        ),
        what="x's credentials",
    )
    orchestrator.apply(namespace, "db", SPEC)
    await orchestrator.until(
        lambda: orchestrator.condition(namespace, "db", "Stalled") == ("True", "ForeignObject"),
        what="db Stalled ForeignObject",
    )
    conditions = orchestrator.get(namespace, "db")["status"]["conditions"]
    said = next(c["message"] for c in conditions if c["type"] == "CredentialsReady")
    assert "DBInstance x" in said
