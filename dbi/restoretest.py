"""Restore tests (``spec.backup.restoreTest``), the rules that need no I/O: the
throwaway instance's name and spec, and what its status says of the test.

A restore test restores the newest Completed backup of an instance, and the WAL
archived since, into a throwaway DBInstance of the same spec in the same namespace
(``spec.restore.from.instance``: the path a restore to now takes), waits for it to go
Ready, deletes it, and writes how it went in the instance's ``status.restoreTest``
(``workflows.restoretest``). The instance's status shows it as the condition
RestoreTestSucceeded.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from typing import Any

from pydantic import Field

from dbi import names
from dbi.backup_spec import Restore
from dbi.backups import Held
from dbi.fields import Section
from dbi.models import Condition, ConditionStatus, RestoreTested
from dbi.spec import DBInstanceSpec, DeletionPolicy, PowerState
from dbi.wal import segment

SUFFIX = "-restore-test"
CONDITION = "RestoreTestSucceeded"
# The label a throwaway instance carries: the name of the instance it tests.
TESTED_LABEL = "dbi.dev/restore-test-of"


class Reason:
    SUCCEEDED = "Restored"
    FAILED = "RestoreFailed"
    TIMED_OUT = "RestoreTimedOut"
    VANISHED = "ThrowawayDeleted"
    NO_BACKUP = "NoCompletedBackup"
    NAME_TAKEN = "NameTaken"
    # The newest backup's first WAL segment is not in the store yet: the test waits.
    WAL_PENDING = "WalNotArchived"
    # No test, and nothing to write: the instance is gone, or asks for no tests.
    NOT_ASKED = "NotAsked"


def throwaway_name(name: str, uid: str) -> str:
    """The throwaway instance's name: ``<name>-restore-test``, or, for a name too long
    for that, a shorter prefix and part of the instance's UID."""
    full = name + SUFFIX
    if len(full) <= names.INSTANCE_NAME_MAX:
        return full
    digest = hashlib.sha256(uid.encode()).hexdigest()[:7]
    keep = names.INSTANCE_NAME_MAX - len(SUFFIX) - len(digest) - 1
    return f"{name[:keep].rstrip('-.')}-{digest}{SUFFIX}"


def throwaway_spec(spec: DBInstanceSpec, name: str) -> dict[str, Any]:
    """The throwaway's spec, from the tested instance's: the same version, image, size
    and settings, running; restored from its backups and all the WAL archived since; no
    backups or maintenance window of its own; its disks deleted with it; its credentials
    in a Secret of its own name (never the tested instance's ``secretName``)."""
    made = spec.model_copy(deep=True)
    made.credentials.secret_name = None
    made.backup = None
    made.maintenance = None
    made.restore = Restore.model_validate({"from": {"instance": name}})
    made.deletion_policy = DeletionPolicy.DELETE
    made.power_state = PowerState.RUNNING
    return made.model_dump(mode="json", by_alias=True, exclude_none=True)


def unarchived(newest: Held, last_archived: str | None) -> str | None:
    """Why a restore from ``newest`` (the newest Completed backup) and the WAL since
    cannot begin yet: the segment it begins in is not stored (the archiver stores WAL
    once a minute; ``last_archived``: status.archive.lastArchivedWAL); None: it can."""
    if newest.begins is None or newest.system is None:
        return None  # taken before WAL archiving: the restore says so itself
    last = None if last_archived is None else segment(last_archived)
    if last is not None and last >= newest.begins:
        return None
    return (
        f"WAL segment {newest.begins.name}, where backup {newest.name} begins, is not "
        f"stored yet (the archiver last stored {last_archived or 'nothing'})."
    )


class Verdict(Section):
    """What the throwaway's status says: whether the test is over, and how it went (or,
    while it is not, where the throwaway is)."""

    over: bool
    succeeded: bool = False
    reason: str = ""
    message: str = ""


def judge(obj: dict[str, Any]) -> Verdict:
    """The test's verdict from the throwaway as read (pure): Ready at its generation is
    a success; Stalled is a failure, in the words of its condition; anything else is
    not over yet."""
    status = obj.get("status") or {}
    generation = (obj.get("metadata") or {}).get("generation")
    conditions = {c.get("type"): c for c in status.get("conditions") or []}
    ready, stalled = conditions.get("Ready") or {}, conditions.get("Stalled") or {}
    if ready.get("status") == "True" and status.get("observedGeneration") == generation:
        return Verdict(over=True, succeeded=True, reason=Reason.SUCCEEDED)
    if stalled.get("status") == "True":
        said = f"{stalled.get('reason', '')}: {stalled.get('message', '')}"
        return Verdict(over=True, reason=Reason.FAILED, message=said[:1024])
    return Verdict(over=False, message=_progress(status, conditions))


def _progress(status: dict[str, Any], conditions: dict[str, Any]) -> str:
    """Where the throwaway is, in a line: its phase and what Ready says."""
    ready = conditions.get("Ready") or {}
    return f"{status.get('phase', 'Pending')}: {ready.get('message', 'not started')}"[:512]


class RestoreTestRequest(Section):
    """What the instance's restore-test Schedule starts a test with."""

    namespace: str
    name: str


class RestoreTestBegun(Section):
    """The throwaway made (``instance``), or why no test runs (``reason``)."""

    instance: str | None = None
    uid: str = ""  # the tested instance's
    timeout_seconds: float = 0.0
    reason: str | None = None
    message: str = ""


class RestoreTestEnd(Section):
    """How a test ended, for ``end_restore_test`` to write."""

    namespace: str
    name: str
    uid: str
    instance: str | None  # the throwaway, to delete; None when none was made
    started_at: datetime
    finished_at: datetime
    succeeded: bool
    reason: str
    message: str = Field(default="", max_length=1024)


def conditions(test: RestoreTested | None, now: datetime) -> list[Condition]:
    """RestoreTestSucceeded from ``status.restoreTest``; none before the first test."""
    if test is None:
        return []
    status = ConditionStatus.TRUE if test.succeeded else ConditionStatus.FALSE
    at = test.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    if test.succeeded:
        message = f"The newest backup and the WAL since restored into {test.instance} at {at}."
    else:
        message = f"The restore test that ended at {at} failed: {test.message}"
    return [
        Condition(
            type=CONDITION,
            status=status,
            reason=test.reason,
            message=message[:1024],
            last_transition_time=now,
        )
    ]
