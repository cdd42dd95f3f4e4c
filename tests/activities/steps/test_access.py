"""access's decision, table-driven from observed states (plain data)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from activities.steps import access

AC = access.Observation(
    stopped=False,
    reachable=True,
    has_app_password=True,
    role_exists=True,
    database_exists=True,
    app_login_works=True,
    secret_complete=True,
)


@pytest.mark.parametrize(
    ("obs", "reason", "action"),
    [
        pytest.param(AC, "AccessReady", None, id="ready"),
        pytest.param(replace(AC, stopped=True), "Stopped", None, id="stopped"),
        pytest.param(
            replace(AC, role_exists=False, database_exists=False, app_login_works=False),
            "RoleCreated",
            access.Action.CREATE_ROLE,
            id="role-first",
        ),
        pytest.param(
            replace(AC, database_exists=False, app_login_works=False),
            "DatabaseCreated",
            access.Action.CREATE_DATABASE,
            id="database",
        ),
        pytest.param(
            replace(AC, app_login_works=False),
            "PasswordSet",
            access.Action.ALTER_LOGIN,
            id="password",
        ),
        pytest.param(
            replace(AC, secret_complete=False),
            "SecretCompleted",
            access.Action.WRITE_CONNECTION_INFO,
            id="secret",
        ),
        pytest.param(replace(AC, reachable=False), "Unreachable", None, id="unreachable"),
    ],
)
def test_access(obs: access.Observation, reason: str, action: access.Action | None) -> None:
    """Access makes one change per pass, in order: role, database, password, Secret."""
    decided = access.decide(obs)
    decision, chosen = decided.result, decided.action
    assert (decision.reason, chosen) == (reason, action)
