"""replicas' decision, from observed states (plain data): one change a look, in order;
the role before any slot, a slot before its member boots; a member beyond
spec.instances goes before its slot; Ready only when every replica streams, with the
members published; a switchover designates its target, restarts the old primary as a
standby, and promotes the target only once no other member is a primary and the target
has replayed as far as each."""

from __future__ import annotations

from dataclasses import replace

import pytest

from activities.infra.replication import Look, Observation, Seen
from activities.steps import replicas
from activities.steps.replicas import Action, Kind
from dbi.models import MemberRole
from dbi.steps import Outcome

VM = {"spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"cpu": {"sockets": 1}}}}}}
HALTED = {"spec": {"runStrategy": "Halted"}}
STREAMING = (("db-2", "0/3000000", 0), ("db-3", "0/2FFFF00", 256))
PRIMARY = Look(
    reachable=True,
    lsn="0/3000000",
    position=0x3000000,
    timeline=1,
    slots=frozenset({"dbi_db_2", "dbi_db_3"}),
    role_ok=True,
    streaming=STREAMING,
)
STANDBY = Look(reachable=True, in_recovery=True, lsn="0/3000000", position=0x3000000, timeline=1)


def _seen(name: str, look: Look = STANDBY, **fields: object) -> Seen:
    base: dict[str, object] = {"name": name, "vm": VM, "desired": VM, "boot_current": True}
    return Seen(**{**base, "vmi_uid": f"uid-{name}", "look": look, **fields})  # type: ignore[arg-type]


OWN = _seen("db", PRIMARY, vm=None, desired=None, added=False)
READY = Observation(
    has_secret=True,
    designated="db",
    serving="db",
    services_ok=True,
    members=(OWN, _seen("db-2"), _seen("db-3")),
)


def _with(obs: Observation, *seen: Seen) -> Observation:
    """``obs`` with these members in place of those of their names."""
    by_name = {s.name: s for s in seen}
    return replace(obs, members=tuple(by_name.pop(s.name, s) for s in obs.members))


SWITCHING = replace(  # db-2 designated; db still serves
    READY, designated="db-2", requested="t1", served="t1"
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(READY, "ReplicasReady", None, id="ready"),
        pytest.param(
            replace(READY, has_secret=False),
            "ReplicationSecretWritten",
            Action(Kind.WRITE_SECRET),
            id="secret-first",
        ),
        pytest.param(
            replace(READY, services_ok=False),
            "ServicesApplied",
            Action(Kind.APPLY_SERVICES),
            id="services",
        ),
        pytest.param(
            _with(READY, replace(OWN, look=Look())), "PrimaryUnreachable", None, id="unreachable"
        ),
        pytest.param(
            _with(READY, replace(OWN, look=replace(PRIMARY, role_ok=False, slots=frozenset()))),
            "ReplicationRoleSet",
            Action(Kind.SET_ROLE, "db"),
            id="role-before-slots",
        ),
        pytest.param(
            _with(READY, replace(OWN, look=replace(PRIMARY, slots=frozenset({"dbi_db_3"})))),
            "SlotCreated",
            Action(Kind.CREATE_SLOT, "db", "dbi_db_2"),
            id="slot",
        ),
        pytest.param(
            _with(READY, _seen("db-2", boot_current=False, vm=None)),
            "MemberBootDataWritten",
            Action(Kind.WRITE_BOOT, "db-2"),
            id="boot-data-before-the-vm",
        ),
        pytest.param(
            _with(READY, _seen("db-2", Look(), vm=None, vmi_uid=None)),
            "MemberCreated",
            Action(Kind.CREATE_VM, "db-2"),
            id="vm",
        ),
        pytest.param(
            replace(_with(READY, _seen("db-2", Look(), vm=None, vmi_uid=None)), certified=False),
            "MembersStarting",
            None,
            id="no-clone-before-the-primary-serves-a-certificate-for-rw",
        ),
        pytest.param(
            _with(READY, _seen("db-2", vm=HALTED)),
            "MemberUpdated",
            Action(Kind.APPLY_VM, "db-2"),
            id="drifted",
        ),
        pytest.param(
            replace(READY, members=READY.members[:2], extra=("db-3",)),
            "MemberRemoved",
            Action(Kind.REMOVE, "db-3"),
            id="scaled-down-member-first",
        ),
        pytest.param(
            replace(READY, members=READY.members[:2]),
            "SlotDropped",
            Action(Kind.DROP_SLOT, "db", "dbi_db_3"),
            id="then-its-slot",
        ),
        pytest.param(
            _with(READY, _seen("db-2", replace(STANDBY, slots=frozenset({"dbi_db_3"})))),
            "SlotDropped",
            Action(Kind.DROP_SLOT, "db-2", "dbi_db_3"),
            id="a-former-primarys-slot-on-a-standby",
        ),
        pytest.param(
            _with(READY, replace(OWN, look=replace(PRIMARY, streaming=STREAMING[:1]))),
            "MembersStarting",
            None,
            id="a-member-not-streaming-yet",
        ),
        pytest.param(
            replace(READY, stopped=True, members=(_seen("db-2", desired=HALTED),)),
            "MemberUpdated",
            Action(Kind.APPLY_VM, "db-2"),
            id="stopped-stops-the-replicas",
        ),
        pytest.param(
            replace(READY, stopped=True, members=(_seen("db-2", vm=HALTED, desired=HALTED),)),
            "Stopped",
            None,
            id="stopped",
        ),
        # A switchover.
        pytest.param(
            replace(READY, requested="t1"),
            "SwitchoverStarted",
            Action(Kind.DESIGNATE, "db-2", "t1"),
            id="switchover-to-the-replica-that-replayed-most",
        ),
        pytest.param(
            replace(READY, requested="t1", target="db-3"),
            "SwitchoverStarted",
            Action(Kind.DESIGNATE, "db-3", "t1"),
            id="switchover-to-the-named-member",
        ),
        pytest.param(
            replace(READY, requested="t1", target="db-9"),
            "SwitchoverWaits",
            None,
            id="switchover-to-a-member-that-does-not-stream-waits",
        ),
        pytest.param(
            replace(READY, requested="t1", served="t1"), "ReplicasReady", None, id="served"
        ),
        pytest.param(
            _with(SWITCHING, replace(OWN, boot_current=False)),
            "MemberBootDataWritten",
            Action(Kind.WRITE_BOOT, "db"),
            id="the-old-primarys-boot-data-first",
        ),
        pytest.param(
            SWITCHING,
            "PrimaryDemoting",
            Action(Kind.RESTART, "db", "uid-db"),
            id="then-it-restarts",
        ),
        pytest.param(
            _with(SWITCHING, replace(OWN, look=Look())),
            "Switching",
            None,
            id="no-promotion-while-it-does-not-answer",
        ),
        pytest.param(
            _with(SWITCHING, replace(OWN, look=replace(STANDBY, position=0x3000100))),
            "Switching",
            None,
            id="no-promotion-before-the-target-replayed-all",
        ),
        pytest.param(
            _with(SWITCHING, replace(OWN, look=STANDBY)),
            "ReplicaPromoted",
            Action(Kind.PROMOTE, "db-2"),
            id="promoted-once-the-old-primary-is-a-standby",
        ),
    ],
)
def test_one_change_a_look_in_order(obs: Observation, reason: str, action: Action | None) -> None:
    decision = replicas.decide(obs)
    assert (decision.result.reason, decision.action) == (reason, action)
    if action is not None:
        assert decision.result.outcome is Outcome.PENDING


def test_two_primaries_are_never_left_running_for_a_promotion() -> None:
    """With the designated member a primary already and another one too (a promotion
    that raced a restart), the other restarts; nothing is promoted."""
    both = _with(SWITCHING, _seen("db-2", PRIMARY))
    decision = replicas.decide(both)
    assert decision.action == Action(Kind.RESTART, "db", "uid-db")
    assert decision.result.facts.primary is None


def test_ready_publishes_every_member_and_a_starting_one_as_not_ready() -> None:
    facts = replicas.decide(READY).result.facts
    assert facts.primary == "db"
    assert [(m.name, m.role, m.ready, m.lag_bytes) for m in facts.members or ()] == [
        ("db", MemberRole.PRIMARY, True, None),
        ("db-2", MemberRole.REPLICA, True, 0),
        ("db-3", MemberRole.REPLICA, True, 256),
    ]
    starting = _with(READY, replace(OWN, look=replace(PRIMARY, streaming=())))
    result = replicas.decide(starting).result
    assert result.outcome is Outcome.PENDING and result.held
    assert [(m.name, m.state, m.ready) for m in result.facts.members or ()][1:] == [
        ("db-2", "Starting", False),
        ("db-3", "Starting", False),
    ]


def test_one_member_asks_for_no_secret_role_or_slot() -> None:
    alone = Observation(
        designated="db",
        services_ok=True,
        members=(replace(OWN, look=replace(PRIMARY, role_ok=False, slots=frozenset())),),
    )
    decision = replicas.decide(alone)
    assert decision.result.outcome is Outcome.SATISFIED and decision.action is None
