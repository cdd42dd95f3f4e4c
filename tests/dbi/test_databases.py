"""A DBDatabase's decisions, with plain data: whose a database is, what a spec may not
ask, how its workflow waits, and the committed CRD."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from activities.objects import database as steps
from activities.objects.database import Seen
from activities.objects.database_release import Release, decide_release
from dbi import crd, names
from dbi.databases import DEFAULT_EXTENSIONS, DBDatabaseSpec, DeletionPolicy, refusal
from dbi.objects import Ledger, Verdict, whose
from dbi.pipeline import DATABASE_CREATE
from dbi.steps import Outcome
from workflows.objects import RECHECK, wait_after

UID, OTHER = "uid-1", "uid-2"


@pytest.mark.parametrize(
    ("db_oid", "row", "verdict"),
    [
        (None, None, Verdict.MISSING),
        (None, Ledger(None, UID, False), Verdict.MISSING),
        (None, Ledger(7, OTHER, False), Verdict.CLAIMED),
        (None, Ledger(7, OTHER, True), Verdict.MISSING),
        (7, None, Verdict.FOREIGN),  # made by hand: never dbi's
        (7, Ledger(6, UID, False), Verdict.FOREIGN),  # dropped and made again by hand
        (7, Ledger(7, UID, False), Verdict.OURS),
        (7, Ledger(None, UID, False), Verdict.ADOPT),  # a crash between claim and create
        (7, Ledger(7, OTHER, True), Verdict.ADOPT),  # kept by a Retain teardown
        (7, Ledger(7, OTHER, False), Verdict.CLAIMED),
        (7, Ledger(None, OTHER, False), Verdict.CLAIMED),
    ],
)
def test_whose_a_database_is(db_oid: int | None, row: Ledger | None, verdict: Verdict) -> None:
    assert whose(db_oid, row, UID) is verdict


def spec(**fields: object) -> DBDatabaseSpec:
    return DBDatabaseSpec.model_validate({"instance": "db", "name": "orders", **fields})


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"name": "template1"}, "spec.name"),
        ({"name": "postgres"}, "spec.name"),
        ({"name": "app"}, "spec.name"),  # the instance's own database
        ({"owner": "dbi_admin"}, "spec.owner"),
        ({"owner": "pg_read_all_data"}, "spec.owner"),
        ({"extensions": ["citext", "plpython3u"]}, "spec.extensions"),
    ],
)
def test_a_spec_its_instance_cannot_serve_is_refused_naming_the_field(
    fields: dict[str, object], field: str
) -> None:
    found = refusal(
        spec(**fields), own_database="app", admin="dbi_admin", allowed=DEFAULT_EXTENSIONS
    )
    assert found is not None and found[0] == field


def test_an_allowed_spec_is_not_refused() -> None:
    allowed = refusal(
        spec(extensions=["citext"]),
        own_database="app",
        admin="dbi_admin",
        allowed=DEFAULT_EXTENSIONS,
    )
    assert allowed is None
    assert spec().deletion_policy is DeletionPolicy.RETAIN  # a database is data


def seen(**fields: object) -> Seen:
    return Seen(**{"owner_exists": True, **fields})  # type: ignore[arg-type]


def decided(s: Seen) -> tuple[Outcome, str, object]:
    d = steps.decide_database(steps.InInstance("orders", "app", UID, True, s))
    return d.result.outcome, d.result.reason, d.action


def test_a_foreign_or_claimed_database_is_never_acted_on() -> None:
    assert decided(seen(db_oid=7)) == (Outcome.TERMINAL, steps.Reason.FOREIGN, None)
    claimed = seen(db_oid=7, row=Ledger(7, OTHER, False))
    assert decided(claimed) == (Outcome.TERMINAL, steps.Reason.CLAIMED, None)


def test_a_database_is_created_adopted_or_given_its_owner() -> None:
    assert decided(seen())[2] == "create"
    assert decided(seen(owner_exists=False))[:2] == (Outcome.PENDING, steps.Reason.OWNER_MISSING)
    assert decided(seen(owner_superuser=True))[0] is Outcome.TERMINAL
    assert decided(seen(db_oid=7, row=Ledger(7, OTHER, True)))[2] == "adopt"
    mine = Ledger(7, UID, False)
    assert decided(seen(db_oid=7, row=mine, db_owner="bob"))[2] == "owner"
    assert decided(seen(db_oid=7, row=mine, db_owner="app"))[:2] == (
        Outcome.SATISFIED,
        DATABASE_CREATE.condition_type,
    )


def release(policy: DeletionPolicy, s: Seen, *, exists: bool = True) -> object:
    o = Release("orders", True, policy, "db", UID, exists=exists, reachable=exists, seen=s)
    return decide_release(o).action


def test_a_teardown_drops_only_what_the_ledger_proves_and_never_hangs() -> None:
    mine = seen(db_oid=7, row=Ledger(7, UID, False))
    assert release(DeletionPolicy.DELETE, mine) == "drop"
    assert release(DeletionPolicy.RETAIN, mine) == "release"
    assert release(DeletionPolicy.DELETE, seen(db_oid=7)) == "unfinalize"  # foreign: kept
    assert (
        release(DeletionPolicy.DELETE, seen(db_oid=7, row=Ledger(7, OTHER, False))) == "unfinalize"
    )
    assert release(DeletionPolicy.DELETE, seen(), exists=False) == "unfinalize"  # no instance


def test_the_workflow_waits_by_the_blocking_outcome() -> None:
    ok = DATABASE_CREATE.result(Outcome.SATISFIED, "R", "m")
    assert wait_after([ok], transient_streak=0, at_once_streak=0) == RECHECK
    stuck = DATABASE_CREATE.result(Outcome.TERMINAL, "R", "m")
    assert wait_after([ok, stuck], transient_streak=0, at_once_streak=0) == RECHECK
    acted = DATABASE_CREATE.result(Outcome.PENDING, "R", "m", requeue_after_seconds=0)
    assert wait_after([acted], transient_streak=0, at_once_streak=0) == timedelta(0)
    assert wait_after([acted], transient_streak=0, at_once_streak=9) > timedelta(0)
    failing = DATABASE_CREATE.result(Outcome.TRANSIENT, "R", "m")
    first = wait_after([failing], transient_streak=1, at_once_streak=0)
    assert wait_after([failing], transient_streak=3, at_once_streak=0) > first


def test_the_committed_dbdatabase_crd_is_rendered_from_the_models(repo_root: Path) -> None:
    committed = (repo_root / "crds" / "dbdatabase.yaml").read_text()
    assert committed == crd.object_yaml(names.DATABASE_KIND), (
        "run: python -m dbi.crd --database > crds/dbdatabase.yaml"
    )
