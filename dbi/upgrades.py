"""A major upgrade of a DBInstance, as the upgrade workflow and its activities pass it.

``spec.version`` going up starts one DBUpgradeWorkflow (the ``upgrade`` step): it makes
the new major's root disk (``begin``), restarts the VM on it with the boot data's
upgrade instruction, and waits for the guest's report (``run``: pg_upgrade --check,
then pg_upgrade into a new data directory, the old one kept), checks the new server
(``verify``: its version, ANALYZE of every database), and only then records the new
major and removes the old data (``finish``: the point of no return). A failure before
that rolls back (``rollback``): the old root disk and the old data boot again, as they
were; a finish that fails is not rolled back (``FINISH_FAILED``): a new attempt finds
the data upgraded and finishes.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

# The upgrade's result when it was verified but could not finish (no rollback then).
FINISH_FAILED = "UpgradeFinishFailed"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class UpgradeRequest(_Model):
    namespace: str
    name: str
    uid: str
    from_major: int
    to_major: int


class Plan(_Model):
    """What ``begin_upgrade`` found and prepared; ``reason`` set: it cannot run."""

    new_root: str = ""
    old_root: str = ""
    new_image: str = ""
    reason: str | None = None
    message: str = ""


class Ran(_Model):
    """The guest's report of the upgrade boot (or of a rollback)."""

    ok: bool
    phase: str = Field(description="upgraded, check, copy, verify, rolled-back, gone")
    output: str = ""
    version: str | None = None  # server_version as the booted server says it


class UpgradeResult(_Model):
    ok: bool
    reason: str
    message: str
