"""The status write's reads and writes, with plain data: it starts from the pass's read,
writes only a status that changed, and a retry reads afresh."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest
from temporalio.testing import ActivityEnvironment

from activities.kube import Instance, Kube
from activities.status import WriteStatus
from activities.step import Context
from dbi.config import Config
from dbi.models import DBInstance, DBInstanceStatus
from dbi.status import PassReport, StatusInput, derive
from dbi.steps import Outcome
from tests.activities.test_ownership import instance as plain_instance
from tests.dbi.test_status import converged, until

UID = "uid-new"  # tests.activities.test_ownership's
RUN = "run/7"  # the pass's id


class Recording:
    """Kube's reads and the status patches, counted; the instance as the server has it."""

    def __init__(self, stored: Instance) -> None:
        self.stored = stored
        self.reads = 0
        self.patches: list[dict[str, Any]] = []
        self.events: list[Any] = []
        self.objects = self.core = self

    def instance(self, namespace: str, name: str) -> Instance:
        self.reads += 1
        return self.stored

    def patch_namespaced_custom_object_status(self, *args: Any) -> None:
        self.patches.append(args[-1])

    def create_namespaced_event(self, namespace: str, body: Any) -> None:
        self.events.append(body)


def with_status(status: DBInstanceStatus) -> Instance:
    base = plain_instance()
    model = DBInstance.model_validate(
        {**base.model.model_dump(by_alias=True, exclude_none=True), "status": status.model_dump()}
    )
    return Instance(model=model, uid=UID, generation=2, deleting=False, finalizers=())


def written_by(report: PassReport) -> DBInstanceStatus:
    return derive(DBInstanceStatus(), report, now=datetime(2026, 12, 1, tzinfo=UTC))[0]


def setup(stored: Instance) -> tuple[WriteStatus, Recording]:
    kube = Recording(stored)
    ctx = Context(kube=cast(Kube, kube), config=Config())
    ctx.passes.remember(RUN, stored)
    return WriteStatus(ctx), kube


def request(report: PassReport) -> StatusInput:
    return StatusInput(namespace="shop", name="db", uid=UID, pass_id=RUN, report=report)


@pytest.mark.parametrize(
    ("before", "now", "patches"),
    [
        pytest.param(converged(), converged(), 0, id="idle-pass-writes-nothing"),
        pytest.param(
            until("vm", Outcome.PENDING, "VMCreated"), converged(), 1, id="a-change-is-written"
        ),
    ],
)
def test_the_status_is_written_from_the_pass_read_and_only_when_it_changed(
    before: PassReport, now: PassReport, patches: int
) -> None:
    activity, kube = setup(with_status(written_by(before)))
    ActivityEnvironment().run(activity.run, request(now))
    assert kube.reads == 0  # the pass's read, not the API server's
    assert len(kube.patches) == patches


def test_a_retry_reads_the_instance_afresh() -> None:
    """A first try may have written before it failed: the retry must see that status,
    or it would emit the same Events again."""
    activity, kube = setup(with_status(written_by(until("vm", Outcome.PENDING, "VMCreated"))))
    env = ActivityEnvironment()
    env.info = env.info.__class__(**{**env.info.__dict__, "attempt": 2})
    env.run(activity.run, request(converged()))
    assert kube.reads == 1 and len(kube.patches) == 1
