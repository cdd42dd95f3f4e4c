"""The sessions the steps of one pass share (``activities.infra.postgres.shared_sessions``),
against a real PostgreSQL booted as a guest is (TLS, SCRAM): the steps' logins as one
user with one password are one session; a step that acts is followed by new logins,
which see what it changed; a session a statement failed on is not taken again; outside
a block every connection is its own; a session whose server stops answering is cut at
its deadline."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import psycopg
import pytest

from activities.infra import postgres
from activities.infra.context import Context
from activities.infra.kube import Instance, Kube
from activities.infra.postgres import drop_sessions, shared_sessions
from activities.steps import health
from activities.steps.loop import Anatomy
from activities.steps.loop import run as run_step
from dbi import bootstrap, pipeline, scram
from dbi.config import Config
from dbi.steps import AT_ONCE, Decision, Outcome, StepInput
from tests.activities.reads import _Reads
from tests.guests import Booted
from tests.polling import eventually

INPUT = StepInput(namespace="team-a", name="db", uid="uid-1")


def backend(server: postgres.Server, password: str) -> int:
    """The server process of the session ``connect`` gives."""
    with postgres.connect(server, password=password) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        return int(row[0])


def sessions_of_dbi(booted: Booted) -> int:
    """dbi's sessions the server has now, counted from a session of the test's own."""
    with psycopg.connect(
        host=booted.server.name,
        hostaddr=booted.server.address,
        sslmode="verify-full",
        sslrootcert=booted.server.ca_file,
        port=postgres.PORT,
        user=bootstrap.Bootstrap.model_fields["admin_user"].default,
        password=booted.password,
        dbname="postgres",
        application_name="the test",
    ) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'dbi-orchestrator'"
        ).fetchone()
        assert row is not None
        return int(row[0])


@dataclass
class ChangesThePassword:
    """A step that logs in as the admin; while the first password still logs in, it
    changes it (as a verifier: no password in SQL) and asks to be looked at at once."""

    booted: Booted
    new: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    logins: list[postgres.Login] = field(default_factory=list)

    def observe(self, ctx: Context, instance: Instance, step_input: StepInput) -> postgres.Login:
        login = postgres.login(self.booted.server, password=self.booted.password)
        self.logins.append(login)
        return login

    def decide(self, login: postgres.Login) -> Decision[str]:
        if login is postgres.Login.OK:
            acting = pipeline.ADMIN.result(
                Outcome.PENDING, "Changing", "Changing.", requeue_after_seconds=AT_ONCE
            )
            return Decision(acting, "change")
        return Decision(pipeline.ADMIN.result(Outcome.SATISFIED, "Changed", "Changed."))

    def act(self, ctx: Context, instance: Instance, login: postgres.Login, action: str) -> None:
        user = psycopg.sql.Identifier(bootstrap.Bootstrap.model_fields["admin_user"].default)
        verifier = psycopg.sql.Literal(scram.verifier(self.new))
        with postgres.connect(self.booted.server, password=self.booted.password) as conn:
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(user, verifier))

    def restore(self) -> None:
        """Give the role the first password back (the module's guest is shared)."""
        user = psycopg.sql.Identifier(bootstrap.Bootstrap.model_fields["admin_user"].default)
        verifier = psycopg.sql.Literal(scram.verifier(self.booted.password))
        with postgres.connect(self.booted.server, password=self.new) as conn:
            conn.execute(psycopg.sql.SQL("ALTER ROLE {} PASSWORD {}").format(user, verifier))


def test_the_steps_of_a_pass_log_in_once(booted: Booted) -> None:
    """Three logins as dbi's admin in one block are one session, closed when the block
    ends; outside a block each is its own."""
    with shared_sessions():
        pids = {backend(booted.server, booted.password) for _ in range(3)}
        assert postgres.login(booted.server, password=booted.password) is postgres.Login.OK
        assert len(pids) == 1
        assert sessions_of_dbi(booted) == 1
    eventually(lambda: sessions_of_dbi(booted) == 0, what="the block's session closed")
    assert len({backend(booted.server, booted.password) for _ in range(3)}) == 3


def test_a_session_a_statement_failed_on_is_not_taken_again(booted: Booted) -> None:
    with shared_sessions():
        first = backend(booted.server, booted.password)
        with (
            pytest.raises(psycopg.errors.UndefinedTable),
            postgres.connect(booted.server, password=booted.password) as conn,
        ):
            conn.execute("SELECT * FROM nowhere")
        assert backend(booted.server, booted.password) != first
        drop_sessions()
        assert sessions_of_dbi(booted) == 0


def test_a_step_that_acts_is_seen_by_new_logins(booted: Booted) -> None:
    """The step's login before it acted does not stand for the logins after: once it
    has changed the password, the old one is refused (a new login), and the step is
    Satisfied on its second look instead of acting again and again."""
    step = ChangesThePassword(booted)
    ctx = Context(kube=cast(Kube, _Reads()), config=Config())
    anatomy = Anatomy(pipeline.ADMIN, step.observe, step.decide, step.act)
    try:
        with shared_sessions():
            result = run_step(ctx, anatomy, INPUT)
            refused = postgres.login(booted.server, password=booted.password)
    finally:
        step.restore()
    assert step.logins == [postgres.Login.OK, postgres.Login.REFUSED]
    assert (result.outcome, refused) == (Outcome.SATISFIED, postgres.Login.REFUSED)


def test_a_session_answers_only_for_what_it_logged_in_with(booted: Booted) -> None:
    """An open session as the admin does not make another password, or another user,
    log in."""
    with shared_sessions():
        assert postgres.login(booted.server, password=booted.password) is postgres.Login.OK
        assert (
            postgres.login(booted.server, password=secrets.token_urlsafe(8))
            is postgres.Login.REFUSED
        )
        assert not postgres.authenticates(
            booted.server, user="app", password=booted.password, dbname="postgres"
        )


def frozen_mid_session(booted: Booted, then: Callable[[], object]) -> object:
    """What ``then`` returns or raises when the guest stops answering (SIGSTOP: its
    kernel still acknowledges, as a guest whose disk stalled) after a block's session
    logged in, run on a thread of its own: a ``then`` still waiting after 30 s fails
    the test. The guest goes on afterwards."""
    assert booted.guest is not None
    found: list[object] = []

    def run() -> None:
        with shared_sessions():
            backend(booted.server, booted.password)  # the block's session, logged in
            assert booted.guest is not None
            booted.guest.freeze()
            try:
                found.append(then())
            except Exception as e:
                found.append(e)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        worker.join(30)
        assert not worker.is_alive(), "still waiting for a server that stopped answering"
    finally:
        booted.guest.thaw()
        worker.join(30)
    eventually(
        lambda: postgres.login(booted.server, password=booted.password) is postgres.Login.OK,
        what="the guest answering again",
    )
    return found[0]


def test_a_session_whose_server_stops_answering_is_cut_off(
    booted: Booted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement on a session whose server stopped answering ends at the deadline in
    ``NoAnswer``, which names the server and the deadline, instead of holding a worker
    thread until the server answers again."""
    monkeypatch.setattr(postgres, "ANSWER_DEADLINE_SECONDS", 2.0)

    def select() -> object:
        with postgres.connect(booted.server, password=booted.password) as conn:
            return conn.execute("SELECT 1").fetchone()

    error = frozen_mid_session(booted, select)
    assert isinstance(error, postgres.NoAnswer), error
    assert f"PostgreSQL at {booted.server.address} did not answer within 2 s" in str(error)


def test_the_health_probe_of_a_server_that_stops_answering_says_unreachable(
    booted: Booted, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The health step's probe on the pass's session, its server frozen, reports it
    unreachable (the step is Pending, `Booting`, and looks again) instead of hanging."""
    monkeypatch.setattr(postgres, "ANSWER_DEADLINE_SECONDS", 2.0)
    found = frozen_mid_session(booted, lambda: health.probe(booted.server, booted.password))
    assert found == health.Probe(reachable=False, login=postgres.Login.UNREACHABLE)
