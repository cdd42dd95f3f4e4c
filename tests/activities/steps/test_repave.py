"""repave's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from activities.steps import repave
from dbi import maintenance
from dbi.steps import Outcome

HELD = maintenance.Hold(
    until=datetime(2026, 12, 5, 2, tzinfo=UTC), seconds=600.0, window="Sat 02:00 UTC for 4h"
)
NEW, OLD = "dbi-images/postgres-16.15", "dbi-images/postgres-16.13"
# Settled on the new image's root disk, running.
R = repave.Observation(
    image=NEW,
    root="db-root-new",
    template_root="db-root-new",
    template_image=NEW,
    vmi_root="db-root-new",
)
# spec.image just changed: the VM still boots (and runs) the old image's disk.
CHANGED = replace(
    R, template_root="db-root-old", template_image=OLD, vmi_root="db-root-old", root_exists=False
)


@pytest.mark.parametrize(
    ("obs", "outcome", "reason", "action"),
    [
        pytest.param(R, Outcome.SATISFIED, "RootDiskCurrent", None, id="current"),
        pytest.param(
            CHANGED, Outcome.PENDING, "RootDiskCreated", repave.Action.CREATE, id="create-new"
        ),
        pytest.param(
            replace(CHANGED, root_exists=True),
            Outcome.PENDING,
            "RootDiskSwitched",
            repave.Action.SWITCH,
            id="switch-template",
        ),
        pytest.param(
            replace(R, vmi_root="db-root-old", old_roots=("db-root-old",)),
            Outcome.PENDING,
            "Repaving",
            repave.Action.RESTART,
            id="restart-onto-new",
        ),
        pytest.param(
            replace(R, vmi_root="db-root-old", hold=HELD),
            Outcome.PENDING,
            "MaintenanceWindow",
            None,
            id="restart-held-for-the-window",
        ),
        pytest.param(
            replace(R, stopped=True, vmi_root=None, hold=HELD, old_roots=("db-root-old",)),
            Outcome.PENDING,
            "OldRootDiskDeleted",
            repave.Action.DELETE_OLD,
            id="stopped-needs-no-window",
        ),
        pytest.param(
            replace(CHANGED, hold=HELD),
            Outcome.PENDING,
            "RootDiskCreated",
            repave.Action.CREATE,
            id="preparing-needs-no-window",
        ),
        pytest.param(
            replace(R, vmi_root="db-root-old", vmi_deleting=True, old_roots=("db-root-old",)),
            Outcome.PENDING,
            "RootDiskRestarting",
            None,
            id="restart-under-way",
        ),
        pytest.param(
            replace(R, vmi_root=None, old_roots=("db-root-old",)),
            Outcome.PENDING,
            "RootDiskRestarting",
            None,
            id="no-vmi-yet-old-disk-kept",
        ),
        pytest.param(
            replace(R, old_roots=("db-root-old",)),
            Outcome.PENDING,
            "OldRootDiskDeleted",
            repave.Action.DELETE_OLD,
            id="delete-old-once-running-new",
        ),
        pytest.param(
            replace(R, stopped=True, vmi_root=None, old_roots=("db-root-old",)),
            Outcome.PENDING,
            "OldRootDiskDeleted",
            repave.Action.DELETE_OLD,
            id="stopped-boots-new-at-start",
        ),
        pytest.param(
            replace(R, root_follows_policy=False),
            Outcome.PENDING,
            "OwnerReferencesSynced",
            repave.Action.APPLY,
            id="owner-reference",
        ),
        pytest.param(
            replace(R, one_disk=True, one_disk_image=NEW),
            Outcome.SATISFIED,
            "OneDisk",
            None,
            id="one-disk-same-image",
        ),
        pytest.param(
            replace(R, one_disk=True, one_disk_image=OLD),
            Outcome.TERMINAL,
            "OneDiskLayout",
            None,
            id="one-disk-new-image",
        ),
    ],
)
def test_decide(
    obs: repave.Observation, outcome: Outcome, reason: str, action: repave.Action | None
) -> None:
    decision = repave.decide(obs)
    assert (decision.result.outcome, decision.result.reason) == (outcome, reason)
    assert decision.action == action


def test_a_running_vm_is_never_restarted_while_its_old_disk_is_deleted() -> None:
    """The old root disk goes only once the VM runs on the new one: never the disk a
    running VM boots."""
    on_old = replace(R, vmi_root="db-root-old", old_roots=("db-root-old",))
    assert repave.decide(on_old).action is repave.Action.RESTART
    assert repave.decide(replace(on_old, vmi_root=None)).action is None


def test_the_restart_names_the_images_and_the_version_before() -> None:
    obs = replace(R, vmi_root="db-root-old", version="16.13")
    message = repave.decide(obs).result.message
    assert NEW in message and "PostgreSQL 16.13" in message and "data disk stays" in message


def test_a_one_disk_instance_is_told_how_to_move_over() -> None:
    message = repave.decide(replace(R, one_disk=True, one_disk_image=OLD)).result.message
    assert "spec.restore.from.backup" in message and OLD in message and NEW in message


def test_the_satisfied_result_publishes_the_image() -> None:
    assert repave.decide(R).result.facts.image == NEW
