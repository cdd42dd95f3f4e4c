"""A DBRole's decisions, with plain data: what a spec may not ask, whose a role is, when
its Secret, password and grants change, what its teardown drops, and the CRD."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.objects import role, role_create, role_release
from dbi import crd, names, scram
from dbi.objects import Ledger
from dbi.roles import DEFAULT_GRANTABLE, DBRoleSpec, refusal
from dbi.steps import Outcome

UID, OTHER, PASSWORD = "uid-1", "uid-2", "correct horse battery staple"


def spec(**fields: object) -> DBRoleSpec:
    return DBRoleSpec.model_validate({"instance": "db", "name": "alice", **fields})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "pg_evil"}, "spec.name"),
        ({"name": "dbi_admin"}, "spec.name"),
        ({"name": "app"}, "spec.name"),  # the instance's application role
        ({"name": "postgres"}, "spec.name"),
        ({"inRoles": ["alice"]}, "spec.inRoles"),
        ({"inRoles": ["dbi_admin"]}, "spec.inRoles"),
        ({"inRoles": ["pg_execute_server_program"]}, "spec.inRoles"),
        ({"inRoles": ["pg_write_server_files"]}, "spec.inRoles"),
    ],
)
def test_a_spec_its_instance_cannot_serve_is_refused_naming_the_field(
    fields: dict[str, object], field: str
) -> None:
    found = refusal(spec(**fields), app_role="app", admin="dbi_admin", grantable=DEFAULT_GRANTABLE)
    assert found is not None and found[0] == field


def test_a_role_of_predefined_and_other_roles_is_not_refused() -> None:
    allowed = spec(inRoles=["pg_read_all_data", "bob"], connectionLimit=5, login=False)
    assert refusal(allowed, app_role="app", admin="dbi_admin", grantable=DEFAULT_GRANTABLE) is None


def role_seen(oid: int | None, row: Ledger | None, **attributes: object) -> role_create.Seen:
    found = role_create.Role(oid, row=row, **attributes)  # type: ignore[arg-type]
    return role_create.Seen("alice", UID, True, -1, PASSWORD, True, found)


def decided(seen: role_create.Seen) -> tuple[Outcome, str, object]:
    d = role_create.decide_role(seen)
    return d.result.outcome, d.result.reason, d.action


def test_a_foreign_or_claimed_role_is_never_acted_on() -> None:
    assert decided(role_seen(9, None))[:2] == (Outcome.TERMINAL, role_create.Reason.FOREIGN)
    claimed = role_seen(9, Ledger(9, OTHER, False))
    assert decided(claimed)[:2] == (Outcome.TERMINAL, role_create.Reason.CLAIMED)
    superuser = role_seen(9, Ledger(9, UID, False), superuser=True)
    assert decided(superuser)[0] is Outcome.TERMINAL


def test_a_role_is_created_then_kept_as_declared_with_the_secrets_password() -> None:
    assert decided(role_seen(None, None))[2] == "create"
    mine = Ledger(9, UID, False)
    right = {"login": True, "limit": -1, "verifier": scram.verifier(PASSWORD)}
    assert decided(role_seen(9, mine, **right))[0] is Outcome.SATISFIED
    rotated = {**right, "verifier": scram.verifier("the old one")}
    assert decided(role_seen(9, mine, **rotated))[2] == "alter"
    assert decided(role_seen(9, mine, **{**right, "limit": 5}))[2] == "alter"
    assert decided(role_seen(9, Ledger(9, OTHER, True), **right))[2] == "adopt"


def test_no_decision_shows_the_password() -> None:
    mine = Ledger(9, UID, False)
    for seen in (role_seen(None, None), role_seen(9, mine, verifier="SCRAM-SHA-256$x")):
        assert PASSWORD not in role_create.decide_role(seen).result.model_dump_json()
        assert PASSWORD not in repr(seen)


def grants(**fields: object) -> role_create.Grants:
    base: dict[str, object] = {"name": "alice", "wanted": frozenset(), "database": "shop"}
    return role_create.Grants(**{**base, **fields})  # type: ignore[arg-type]


def test_grants_follow_in_roles_among_the_roles_dbi_may_grant_only() -> None:
    other_instance = grants(wanted=frozenset({"theirs"}))
    assert role_create.decide_grants(other_instance).result.outcome is Outcome.TERMINAL
    declared = grants(wanted=frozenset({"bob"}), declared=frozenset({"bob"}))
    assert role_create.decide_grants(declared).result.reason == role_create.Reason.WAITING_FOR_ROLE
    change = grants(
        wanted=frozenset({"bob", "pg_read_all_data"}),
        managed=frozenset({"bob"}),
        member_of=frozenset({"pg_monitor"}),
        can_connect=False,
    )
    assert role_create.decide_grants(change).action == (
        frozenset({"bob", "pg_read_all_data"}),
        frozenset({"pg_monitor"}),
        True,
    )
    done = grants(
        wanted=frozenset({"bob"}), managed=frozenset({"bob"}), member_of=frozenset({"bob"})
    )
    assert role_create.decide_grants(done).result.outcome is Outcome.SATISFIED


def credentials(**fields: object) -> role.Credentials:
    wanted = {"username": "alice", "password": PASSWORD, "dbname": "shop"}
    base: dict[str, object] = {
        "name": "alice-credentials",
        "exists": True,
        "ours": True,
        "given": False,
        "given_missing": False,
        "current": wanted,
        "wanted": wanted,
        "rotation": "",
    }
    return role.Credentials(**{**base, **fields})  # type: ignore[arg-type]


def test_the_secret_is_written_only_when_it_is_this_roles_and_differs() -> None:
    assert role.decide_secret(credentials()).result.outcome is Outcome.SATISFIED
    assert role.decide_secret(credentials(ours=False)).result.outcome is Outcome.TERMINAL
    assert role.decide_secret(credentials(exists=False, current={})).action == "write"
    assert role.decide_secret(credentials(given=True, given_missing=True)).action is None
    extra = credentials(current={**credentials().wanted, "mine": "kept"})
    assert role.decide_secret(extra).result.outcome is Outcome.SATISFIED  # a user's key stays
    assert PASSWORD not in repr(credentials())


def release(oid: int | None, row: Ledger | None, *, depended: bool = False) -> object:
    found = role_create.Role(oid, row=row)
    o = role_release.Release("alice", True, "db", UID, True, True, found, depended)
    return role_release.decide_release(o).action


def test_a_teardown_drops_a_role_that_owns_nothing_and_keeps_one_that_does() -> None:
    mine = Ledger(9, UID, False)
    assert release(9, mine) == "drop"
    assert release(9, mine, depended=True) == "keep"
    assert release(9, None) == "unfinalize"  # foreign: left alone
    assert release(None, None) == "unfinalize"


def test_the_committed_dbrole_crd_is_rendered_from_the_models(repo_root: Path) -> None:
    committed = (repo_root / "crds" / "dbrole.yaml").read_text()
    assert committed == crd.object_yaml(names.ROLE_KIND), (
        "run: python -m dbi.crd --role > crds/dbrole.yaml"
    )
