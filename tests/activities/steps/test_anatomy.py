"""Every step has the same parts. Its Observation holds facts only: keyword-only fields
a pure ``decide`` reads and a log line may show, never a password, a connection or a
Secret as read (``act`` reads again what it needs: ``activities.steps.loop``). A reason
several steps give is declared once (``dbi.steps.Common``)."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path
from typing import Any

from activities.infra import postgres, secrets
from activities.infra.admin_credential import Credential
from activities.worker.registry import MODULES
from dbi import tls
from dbi.steps import Common

# What an Observation may not hold: the means to act, which act reads again.
NOT_FACTS = (postgres.Server, tls.KeyPair, secrets.Read, Credential)


def non_facts(observation: type[Any], *, nested: bool = False) -> list[str]:
    """The fields of ``observation`` (and of the dataclasses it holds) that are not
    facts, and why."""
    found = []
    if not dataclasses.is_dataclass(observation):
        return [f"{observation.__name__}: not a dataclass"]
    frozen = observation.__dataclass_params__.frozen  # type: ignore[attr-defined]
    keywords = all(f.kw_only for f in dataclasses.fields(observation))
    if not nested and not (frozen and keywords):
        found.append(f"{observation.__name__}: not frozen and keyword-only")
    hints = typing.get_type_hints(observation)
    for field in dataclasses.fields(observation):
        held = {a for a in typing.get_args(hints[field.name]) or (hints[field.name],)}
        if ("password" in field.name and str in held) or not field.repr:
            found.append(f"{field.name}: a secret")
        if any(isinstance(h, type) and issubclass(h, NOT_FACTS) for h in held):
            found.append(f"{field.name}: {hints[field.name]}")
        for inner in (h for h in held if isinstance(h, type) and dataclasses.is_dataclass(h)):
            found += [f"{field.name}.{w}" for w in non_facts(inner, nested=True)]
    return found


def test_every_observation_holds_facts_only() -> None:
    found = {m.__name__: wrong for m in MODULES if (wrong := non_facts(m.Observation))}
    assert found == {}


@dataclasses.dataclass(frozen=True)
class Reads:
    app: secrets.Read


@dataclasses.dataclass(frozen=True)
class Observation:
    reachable: bool
    server: postgres.Server | None = None
    admin_password: str = dataclasses.field(default="", repr=False)
    reads: Reads | None = None


def test_the_check_finds_a_password_a_connection_and_a_secret_as_read() -> None:
    assert non_facts(Observation) == [
        "Observation: not frozen and keyword-only",
        f"server: {postgres.Server | None}",
        "admin_password: a secret",
        f"reads.app: {secrets.Read}",
    ]


def written_reasons(sources: dict[str, str]) -> dict[str, list[str]]:
    """The reasons each step module writes as a literal in its ``Reason`` enum, by value."""
    found: dict[str, list[str]] = {}
    for module, source in sources.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.name == "Reason":
                for item in node.body:
                    if isinstance(item, ast.Assign) and isinstance(item.value, ast.Constant):
                        found.setdefault(str(item.value.value), []).append(module)
    return found


def reasons_written_twice(sources: dict[str, str]) -> list[str]:
    """Reasons written as a literal by two steps, or written where ``Common`` has them:
    a reason several steps give is declared once (``dbi.steps.Common``)."""
    common = {c.value for c in Common}
    return sorted(
        f"{value}: {', '.join(modules)}"
        for value, modules in written_reasons(sources).items()
        if len(modules) > 1 or value in common
    )


def test_a_reason_several_steps_give_is_declared_once() -> None:
    sources = {m.__name__: Path(str(m.__file__)).read_text() for m in MODULES}
    assert reasons_written_twice(sources) == []


def test_the_check_finds_a_reason_written_twice() -> None:
    one = 'class Reason(StrEnum):\n    GONE = "Gone"\n    STOPPED = "Stopped"\n'
    two = 'class Reason(StrEnum):\n    GONE = "Gone"\n    OTHER = Common.BOOTING\n'
    assert reasons_written_twice({"a": one, "b": two}) == ["Gone: a, b", "Stopped: a"]
