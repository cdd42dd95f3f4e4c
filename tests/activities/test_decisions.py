"""Each step's pure decision, table-driven from observed states (no cluster, no Temporal)."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest

from activities import (
    access,
    credentials,
    health,
    manifests,
    monitoring,
    power,
    preflight,
    resize,
    vm,
)
from dbi.models import PowerState, ResizePolicy
from dbi.steps import Outcome

GI = Decimal(2**30)


PRE = preflight.Observation(
    version=18,
    image="dbi-images/postgres-18",
    image_exists=True,
    storage=10 * GI,
    disk_capacity=None,
    has_finalizer=True,
)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(PRE, Outcome.SATISFIED, "SpecValid", id="valid"),
        pytest.param(
            replace(PRE, has_finalizer=False),
            Outcome.PENDING,
            "FinalizerAdded",
            id="adds-finalizer",
        ),
        pytest.param(
            replace(PRE, image=None),
            Outcome.TERMINAL,
            "UnsupportedVersion",
            id="no-image-for-version",
        ),
        pytest.param(
            replace(PRE, image_exists=False), Outcome.TERMINAL, "ImageNotFound", id="unknown-image"
        ),
        pytest.param(
            replace(PRE, disk_capacity=20 * GI),
            Outcome.TERMINAL,
            "StorageBelowCapacity",
            id="below-capacity",
        ),
        pytest.param(
            replace(PRE, disk_capacity=10 * GI), Outcome.SATISFIED, "SpecValid", id="equal-capacity"
        ),
    ],
)
def test_preflight(obs: preflight.Observation, outcome: Outcome, reason: str) -> None:
    """Preflight is Terminal for what a retry cannot fix, Pending while it adds the finalizer."""
    decision = preflight.decide(obs)
    assert (decision.outcome, decision.reason) == (outcome, reason)
    if outcome is Outcome.TERMINAL:
        assert "spec." in decision.message


CREDS = credentials.Observation(admin_complete=True, app_complete=True, cloudinit_matches=True)
C = credentials.Action


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(CREDS, "SecretsReady", C.NONE, id="complete"),
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
            replace(CREDS, kept_follow_policy=False),
            "OwnerReferencesSynced",
            C.WRITE,
            id="cloud-init-owner-reference-differs-from-deletion-policy",
        ),
        pytest.param(
            replace(CREDS, admin_complete=False, legacy_admin=True, data_disk_exists=True),
            "AdminCredentialMoved",
            C.MOVE_ADMIN,
            id="legacy-admin-secret-moves-out-of-the-tenants-namespace",
        ),
        pytest.param(
            replace(CREDS, legacy_admin=True),
            "AdminCredentialMoved",
            C.DROP_LEGACY,
            id="moved-legacy-admin-secret-is-deleted",
        ),
        pytest.param(
            replace(CREDS, adoptable_admin=True),
            "AdminCredentialAdopted",
            C.ADOPT_ADMIN,
            id="adopted-instances-credential-is-taken-over",
        ),
        pytest.param(
            replace(CREDS, admin_complete=False, data_disk_exists=True),
            "AdminCredentialReset",
            C.RESET_ADMIN,
            id="lost-credential-is-reset-never-regenerated-blindly",
        ),
    ],
)
def test_credentials(obs: credentials.Observation, reason: str, action: credentials.Action) -> None:
    """Satisfied only when every credential is complete; a missing admin credential is
    moved, adopted or reset when data exists, and made anew only for a new instance."""
    name = "db-credentials"
    decision, act = credentials.decide(obs, secret_name=name)
    assert (decision.reason, act) == (reason, action)
    if decision.outcome is Outcome.SATISFIED:
        assert decision.facts.credentials_secret_name == name
    else:
        assert decision.outcome is Outcome.PENDING


DESIRED: dict[str, Any] = {
    "metadata": {"name": "db"},
    "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"cpu": {"sockets": 2}}}}},
}


@pytest.mark.parametrize(
    ("observed", "reason"),
    [
        pytest.param(None, "VMCreated", id="missing"),
        pytest.param(DESIRED, "VMProvisioned", id="matches"),
        pytest.param(
            {
                "metadata": {"name": "db", "annotations": {"x": "y"}},
                "spec": {**DESIRED["spec"], "runStrategy": "Halted", "extra": 1},
            },
            "VMProvisioned",
            id="foreign-fields-and-run-strategy-ignored",
        ),
        pytest.param(
            {
                "metadata": {"name": "db"},
                "spec": {
                    "runStrategy": "Always",
                    "template": {"spec": {"domain": {"cpu": {"sockets": 8}}}},
                },
            },
            "VMUpdated",
            id="cpu-drift",
        ),
    ],
)
def test_vm(observed: dict[str, object] | None, reason: str) -> None:
    """The VM is created when missing and re-applied when a field we own drifted."""
    assert vm.decide(DESIRED, observed).reason == reason


OWNED = {"ownerReferences": [{"uid": "u-1", "kind": "DBInstance"}]}


@pytest.mark.parametrize(
    ("desired_meta", "observed_meta", "reason"),
    [
        pytest.param(OWNED, OWNED, "VMProvisioned", id="delete-policy-owned"),
        pytest.param({}, {}, "VMProvisioned", id="retain-policy-not-owned"),
        pytest.param({}, OWNED, "VMUpdated", id="retain-policy-but-owned"),
        pytest.param(OWNED, {}, "VMUpdated", id="delete-policy-but-not-owned"),
    ],
)
def test_vm_owner_reference_follows_the_deletion_policy(
    desired_meta: dict[str, Any], observed_meta: dict[str, Any], reason: str
) -> None:
    """The VM carries the instance's owner reference exactly when the desired VM does
    (deletionPolicy Delete); a difference either way is corrected."""
    desired = {**DESIRED, "metadata": {"name": "db", **desired_meta}}
    observed = {**DESIRED, "metadata": {"name": "db", **observed_meta}}
    assert vm.decide(desired, observed, uid="u-1").reason == reason


def test_covers_compares_lists_exactly() -> None:
    """A volume list with a different length is drift, even if it starts the same."""
    assert not manifests.covers({"v": [1]}, {"v": [1, 2]})
    assert manifests.covers({"v": [{"a": 1}]}, {"v": [{"a": 1, "b": 2}]})


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "patch"),
    [
        pytest.param(
            power.Observation(PowerState.RUNNING, "Always", "Running", "Running"),
            Outcome.SATISFIED,
            "Running",
            False,
            id="running",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, "Halted", None, "Stopped"),
            Outcome.PENDING,
            "Starting",
            True,
            id="start",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, "Always", "Scheduling", "Starting"),
            Outcome.PENDING,
            "Starting",
            False,
            id="booting",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Always", "Running", "Running"),
            Outcome.PENDING,
            "Stopping",
            True,
            id="stop",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Halted", "Running", "Stopping"),
            Outcome.PENDING,
            "Stopping",
            False,
            id="stopping",
        ),
        pytest.param(
            power.Observation(PowerState.STOPPED, "Halted", None, "Stopped"),
            Outcome.SATISFIED,
            "Stopped",
            False,
            id="stopped",
        ),
        pytest.param(
            power.Observation(PowerState.RUNNING, None, None, None),
            Outcome.PENDING,
            "VMMissing",
            False,
            id="no-vm",
        ),
    ],
)
def test_power(obs: power.Observation, outcome: Outcome, reason: str, patch: bool) -> None:
    """runStrategy follows powerState; the step waits until KubeVirt shows the transition."""
    decision, change = power.decide(obs)
    assert (decision.outcome, decision.reason, change) == (outcome, reason, patch)


RS = resize.Observation(
    cpu=2,
    memory=2 * GI,
    storage=10 * GI,
    policy=ResizePolicy.RESTART,
    allow_restart=False,
    stopped=False,
    restart_required=False,
    vmi_sockets=2,
    vmi_memory=2 * GI,
    claim_request=10 * GI,
    claim_capacity=10 * GI,
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(RS, "SizeSynced", resize.Action.NONE, id="synced"),
        pytest.param(
            replace(RS, storage=20 * GI),
            "StorageExpanding",
            resize.Action.GROW_CLAIM,
            id="grow-claim",
        ),
        pytest.param(
            replace(RS, storage=20 * GI, claim_request=20 * GI),
            "StorageExpanding",
            resize.Action.NONE,
            id="wait-capacity",
        ),
        pytest.param(
            replace(RS, restart_required=True),
            "Restarting",
            resize.Action.RESTART,
            id="restart-policy",
        ),
        pytest.param(
            replace(RS, restart_required=True, policy=ResizePolicy.DEFERRED),
            "RestartRequired",
            resize.Action.NONE,
            id="deferred-waits",
        ),
        pytest.param(
            replace(RS, restart_required=True, policy=ResizePolicy.DEFERRED, allow_restart=True),
            "Restarting",
            resize.Action.RESTART,
            id="forced",
        ),
        pytest.param(
            replace(RS, memory=3 * GI), "LiveResizing", resize.Action.NONE, id="live-pending"
        ),
        pytest.param(
            replace(RS, stopped=True, restart_required=True, vmi_sockets=None, vmi_memory=None),
            "SizeSynced",
            resize.Action.NONE,
            id="stopped",
        ),
    ],
)
def test_resize(obs: resize.Observation, reason: str, action: resize.Action) -> None:
    """Storage grows first; a restart happens only when the policy or force_resize allows it."""
    decision, chosen = resize.decide(obs)
    assert (decision.reason, chosen) == (reason, action)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(
            health.Observation(False, "127.10.0.2", True, "18.6", False),
            Outcome.SATISFIED,
            "Healthy",
            id="healthy",
        ),
        pytest.param(
            health.Observation(True, None, False, None, False),
            Outcome.SATISFIED,
            "Stopped",
            id="stopped",
        ),
        pytest.param(
            health.Observation(False, None, False, None, False),
            Outcome.PENDING,
            "NoAddress",
            id="no-address",
        ),
        pytest.param(
            health.Observation(False, "127.10.0.2", False, None, False),
            Outcome.PENDING,
            "Booting",
            id="booting",
        ),
        pytest.param(
            health.Observation(False, "127.10.0.2", True, "18.6", True),
            Outcome.PENDING,
            "InRecovery",
            id="recovery",
        ),
        pytest.param(
            health.Observation(False, "127.10.0.2", False, None, False, admin_refused=True),
            Outcome.TERMINAL,
            "AdminPasswordRefused",
            id="admin-refused",
        ),
    ],
)
def test_health(obs: health.Observation, outcome: Outcome, reason: str) -> None:
    """Health publishes the endpoint when PostgreSQL answers, and waits while it boots."""
    decision = health.decide(obs)
    assert (decision.outcome, decision.reason) == (outcome, reason)
    if reason == "Healthy":
        assert (decision.facts.endpoint_host, decision.facts.postgres_version) == (
            "127.10.0.2",
            "18.6",
        )


AC = access.Observation(
    stopped=False,
    reachable=True,
    has_app_password=True,
    role_exists=True,
    database_exists=True,
    app_login_works=True,
    secret_complete=True,
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(AC, "AccessReady", access.Action.NONE, id="ready"),
        pytest.param(replace(AC, stopped=True), "Stopped", access.Action.NONE, id="stopped"),
        pytest.param(
            replace(AC, role_exists=False, database_exists=False, app_login_works=False),
            "RoleCreated",
            access.Action.CREATE_ROLE,
            id="role-first",
        ),
        pytest.param(
            replace(AC, database_exists=False, app_login_works=False),
            "DatabaseCreated",
            access.Action.CREATE_DATABASE,
            id="database",
        ),
        pytest.param(
            replace(AC, app_login_works=False),
            "PasswordSet",
            access.Action.ALTER_LOGIN,
            id="password",
        ),
        pytest.param(
            replace(AC, secret_complete=False),
            "SecretCompleted",
            access.Action.WRITE_CONNECTION_INFO,
            id="secret",
        ),
        pytest.param(
            replace(AC, reachable=False), "Unreachable", access.Action.NONE, id="unreachable"
        ),
    ],
)
def test_access(obs: access.Observation, reason: str, action: access.Action) -> None:
    """Access makes one change per pass, in order: role, database, password, Secret."""
    decision, chosen = access.decide(obs)
    assert (decision.reason, chosen) == (reason, action)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason"),
    [
        pytest.param(
            monitoring.Observation(True, True, True, True, True, True),
            Outcome.SATISFIED,
            "MonitoringReady",
            id="ready",
        ),
        pytest.param(
            monitoring.Observation(True, False, False, True, False, False),
            Outcome.PENDING,
            "MonitoringApplied",
            id="create",
        ),
        pytest.param(
            monitoring.Observation(True, True, True, False, False, False),
            Outcome.SATISFIED,
            "ServiceMonitorUnavailable",
            id="no-crd",
        ),
        pytest.param(
            monitoring.Observation(False, False, True, True, False, True),
            Outcome.PENDING,
            "MonitoringRemoved",
            id="disable",
        ),
        pytest.param(
            monitoring.Observation(False, False, False, True, False, False),
            Outcome.SATISFIED,
            "Disabled",
            id="disabled",
        ),
    ],
)
def test_monitoring(obs: monitoring.Observation, outcome: Outcome, reason: str) -> None:
    """Monitoring objects follow monitoring.enabled; no ServiceMonitor API is not a failure loop."""
    decision = monitoring.decide(obs)
    assert (decision.outcome, decision.reason) == (outcome, reason)
