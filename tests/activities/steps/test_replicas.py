"""replicas' decision, from observed states (plain data): one change a look, in order;
the role before any slot, a slot before its member boots, a member's boot data before
its VM; a member beyond spec.instances goes before its slot; Ready only when every
replica streams, with the members published."""

from __future__ import annotations

from dataclasses import replace

import pytest

from activities.steps import replicas
from activities.steps.replicas import Action, Kind, Observation, Seen
from dbi.models import Member, MemberRole
from dbi.steps import Outcome

VM = {"spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"cpu": {"sockets": 1}}}}}}
HALTED = {"spec": {"runStrategy": "Halted"}}
PRIMARY = Member(name="db", role=MemberRole.PRIMARY, ready=True, state="Serving", lsn="0/3000000")


def _seen(name: str, **fields: object) -> Seen:
    return Seen(
        **{"name": name, "vm": VM, "desired": VM, "boot_current": True, "running": True, **fields}  # type: ignore[arg-type]
    )


READY = Observation(
    has_secret=True,
    services_ok=True,
    reachable=True,
    role_ok=True,
    slots=frozenset({"dbi_db_2", "dbi_db_3"}),
    wanted=(_seen("db-2"), _seen("db-3")),
    streaming={"db-2": ("0/3000000", 0), "db-3": ("0/2FFFF00", 256)},
    primary=PRIMARY,
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(READY, "ReplicasReady", None, id="ready"),
        pytest.param(
            replace(READY, has_secret=False, role_ok=False, slots=frozenset()),
            "ReplicationSecretWritten",
            Action(Kind.WRITE_SECRET),
            id="secret-first",
        ),
        pytest.param(
            replace(READY, services_ok=False, reachable=False),
            "ServicesApplied",
            Action(Kind.APPLY_SERVICES),
            id="services-before-the-primary-answers",
        ),
        pytest.param(replace(READY, reachable=False), "PrimaryUnreachable", None, id="unreachable"),
        pytest.param(
            replace(READY, role_ok=False, slots=frozenset()),
            "ReplicationRoleSet",
            Action(Kind.SET_ROLE),
            id="role-before-slots",
        ),
        pytest.param(
            replace(READY, slots=frozenset({"dbi_db_3"}), wanted=(_seen("db-2", vm=None),)),
            "SlotCreated",
            Action(Kind.CREATE_SLOT, "db-2"),
            id="slot-before-the-member",
        ),
        pytest.param(
            replace(READY, wanted=(_seen("db-2", boot_current=False, vm=None),)),
            "MemberBootDataWritten",
            Action(Kind.WRITE_BOOT, "db-2"),
            id="boot-data-before-the-vm",
        ),
        pytest.param(
            replace(READY, wanted=(_seen("db-2", vm=None),)),
            "MemberCreated",
            Action(Kind.CREATE_VM, "db-2"),
            id="vm",
        ),
        pytest.param(
            replace(READY, wanted=(_seen("db-2", vm=HALTED),)),
            "MemberUpdated",
            Action(Kind.APPLY_VM, "db-2"),
            id="drifted",
        ),
        pytest.param(
            replace(READY, wanted=(_seen("db-2"),), extra=("db-3",)),
            "MemberRemoved",
            Action(Kind.REMOVE, "db-3"),
            id="scaled-down-member-first",
        ),
        pytest.param(
            replace(READY, wanted=(_seen("db-2"),)),
            "SlotDropped",
            Action(Kind.DROP_SLOT, "dbi_db_3"),
            id="then-its-slot",
        ),
        pytest.param(
            replace(READY, streaming={"db-2": ("0/3000000", 0)}),
            "MembersStarting",
            None,
            id="a-member-not-streaming-yet",
        ),
        pytest.param(
            replace(READY, stopped=True, wanted=(_seen("db-2", desired=HALTED),)),
            "MemberUpdated",
            Action(Kind.APPLY_VM, "db-2"),
            id="stopped-stops-the-replicas",
        ),
        pytest.param(
            replace(READY, stopped=True, wanted=(_seen("db-2", vm=HALTED, desired=HALTED),)),
            "Stopped",
            None,
            id="stopped",
        ),
    ],
)
def test_one_change_a_look_in_order(obs: Observation, reason: str, action: Action | None) -> None:
    decision = replicas.decide(obs)
    assert (decision.result.reason, decision.action) == (reason, action)
    if action is not None:
        assert decision.result.outcome is Outcome.PENDING


def test_ready_publishes_every_member_and_a_starting_one_as_not_ready() -> None:
    facts = replicas.decide(READY).result.facts
    assert facts.primary == "db"
    assert [(m.name, m.role, m.ready, m.lag_bytes) for m in facts.members or ()] == [
        ("db", MemberRole.PRIMARY, True, None),
        ("db-2", MemberRole.REPLICA, True, 0),
        ("db-3", MemberRole.REPLICA, True, 256),
    ]
    starting = replicas.decide(replace(READY, streaming={})).result
    assert starting.outcome is Outcome.PENDING
    assert [(m.name, m.state, m.ready) for m in starting.facts.members or ()][1:] == [
        ("db-2", "Starting", False),
        ("db-3", "Starting", False),
    ]


def test_one_member_asks_for_no_secret_role_or_slot() -> None:
    alone = Observation(services_ok=True, reachable=True, primary=PRIMARY)
    decision = replicas.decide(alone)
    assert decision.result.outcome is Outcome.SATISFIED and decision.action is None
