"""Restore tests' rules, with plain data: the throwaway's name and spec, the verdict its
status gives, and the condition the tested instance shows (``dbi.restoretest``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from dbi import names, restoretest
from dbi.backups import BackupPhase, Held
from dbi.models import DBInstanceStatus, RestoreTested
from dbi.restoretest import Reason, judge, unarchived
from dbi.spec import DBInstanceSpec
from dbi.status import derive
from dbi.wal import Segment
from tests.dbi.passes import converged
from tests.dbi.specs import MINIMAL as VALID

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def test_the_throwaway_is_named_after_the_instance_and_fits_every_child_name() -> None:
    assert restoretest.throwaway_name("orders", "uid-1") == "orders-restore-test"
    longest = "a" * names.INSTANCE_NAME_MAX
    one, other = (restoretest.throwaway_name(longest, uid) for uid in ("uid-1", "uid-2"))
    assert len(one) == len(other) == names.INSTANCE_NAME_MAX
    assert one != other  # two long names that share a prefix do not share a throwaway
    assert one.endswith(restoretest.SUFFIX)


def test_the_throwaway_restores_the_instance_at_its_size_and_leaves_nothing_behind() -> None:
    spec = {
        **VALID,
        "backup": {"schedule": "@daily", "restoreTest": {}},
        "deletionPolicy": "Retain",
        "maintenance": {"window": {"start": "02:00", "duration": "2h"}},
        "restore": {"from": {"backup": "orders-20261201"}},
        "powerState": "Stopped",
        "credentials": {"username": "shop", "secretName": "orders-app"},
    }
    made = restoretest.throwaway_spec(DBInstanceSpec.model_validate(spec), "orders")
    assert made["resources"] == VALID["resources"]
    assert made["version"] == VALID["version"]
    assert made["deletionPolicy"] == "Delete"  # its disks go with it
    assert made["powerState"] == "Running"
    # The same role, but never the instance's own Secret: <throwaway>-credentials.
    assert made["credentials"] == {"username": "shop", "database": "app"}
    assert made["restore"] == {"from": {"instance": "orders"}, "immediate": False}  # all WAL
    assert "backup" not in made and "maintenance" not in made
    DBInstanceSpec.model_validate(made)  # a spec the API server and the worker take


def conditioned(**status: Any) -> dict[str, Any]:
    return {"metadata": {"generation": 1}, "status": {"observedGeneration": 1, **status}}


@pytest.mark.parametrize(
    ("obj", "over", "succeeded", "said"),
    [
        pytest.param(
            conditioned(conditions=[{"type": "Ready", "status": "True"}]),
            True,
            True,
            "",
            id="ready",
        ),
        pytest.param(
            conditioned(
                phase="Failed",
                conditions=[
                    {"type": "Ready", "status": "False"},
                    {
                        "type": "Stalled",
                        "status": "True",
                        "reason": "RestoreSourceInvalid",
                        "message": "WAL segment 000000010000000000000004 is missing",
                    },
                ],
            ),
            True,
            False,
            "RestoreSourceInvalid: WAL segment 000000010000000000000004 is missing",
            id="stalled",
        ),
        pytest.param(
            {
                "metadata": {"generation": 2},
                "status": {
                    "observedGeneration": 1,
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
            False,
            False,
            "Pending: not started",
            id="ready-at-an-older-generation-is-not-over",
        ),
        pytest.param(
            conditioned(
                phase="Provisioning",
                conditions=[{"type": "Ready", "status": "False", "message": "vm: booting"}],
            ),
            False,
            False,
            "Provisioning: vm: booting",
            id="on-its-way",
        ),
    ],
)
def test_the_throwaways_status_is_the_verdict(
    obj: dict[str, Any], over: bool, succeeded: bool, said: str
) -> None:
    verdict = judge(obj)
    assert (verdict.over, verdict.succeeded, verdict.message) == (over, succeeded, said)


def test_the_tested_instance_shows_the_last_test_as_a_condition_and_a_failure_as_a_warning() -> (
    None
):
    passed = RestoreTested(
        succeeded=True,
        reason=Reason.SUCCEEDED,
        instance="db-restore-test",
        started_at=T0,
        finished_at=T0,
    )
    status, events = derive(DBInstanceStatus(restore_test=passed), converged(), now=T0)
    (shown,) = [c for c in status.conditions if c.type == restoretest.CONDITION]
    assert (shown.status.value, shown.reason) == ("True", "Restored")
    assert "restored into db-restore-test at 2026-12-07T12:00:00Z" in shown.message
    assert [e.type for e in events if e.reason == "Restored"] == ["Normal"]

    failed = passed.model_copy(
        update={"succeeded": False, "reason": Reason.FAILED, "message": "WAL gap"}
    )
    later, events = derive(status.model_copy(update={"restore_test": failed}), converged(), now=T0)
    (shown,) = [c for c in later.conditions if c.type == restoretest.CONDITION]
    assert (shown.status.value, shown.reason) == ("False", "RestoreFailed")
    assert shown.message.endswith("failed: WAL gap")
    assert [e.type for e in events if e.reason == "RestoreFailed"] == ["Warning"]
    # A pass does not write status.restoreTest: the test's own merge does.
    assert later.restore_test is None
    # Before any test there is no such condition.
    status, _ = derive(DBInstanceStatus(), converged(), now=T0)
    assert restoretest.CONDITION not in {c.type for c in status.conditions}


def test_a_test_waits_until_the_wal_its_backup_begins_in_is_stored() -> None:
    """A test right after a backup would fail: the archiver (once a minute) has not
    stored the segment the backup begins in. It waits for that, and only that."""
    newest = Held(
        name="orders-1",
        phase=BackupPhase.COMPLETED,
        started=T0,
        begins=Segment(1, 4),
        system="7716544716374999210",
    )
    said = unarchived(newest, "000000010000000000000003")
    assert said is not None
    assert "WAL segment 000000010000000000000004, where backup orders-1 begins" in said
    assert "last stored 000000010000000000000003" in said
    assert unarchived(newest, None) is not None  # nothing stored yet
    assert unarchived(newest, "000000010000000000000004") is None
    assert unarchived(newest, "000000020000000000000004") is None  # a later timeline
    # Taken before WAL archiving: nothing to wait for (the restore names it).
    assert unarchived(Held(name="old", phase=BackupPhase.COMPLETED, started=T0), None) is None
