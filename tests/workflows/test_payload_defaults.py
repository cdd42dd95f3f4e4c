"""The defaults of every model dbi's payloads carry stay what recorded histories meant.

``dbi.payloads`` leaves out the fields that hold their default, so a payload written
before a default changed would decode to the new one: a pass's result would say what
its step never said. Every model reachable from an activity's or a workflow's inputs
and results (signals, updates and queries too) is listed here with its defaults;
``payload_defaults.json`` records them. A change to one fails here: add a field
instead. A new model or field is recorded with
DBI_RECORD_DEFAULTS=1 ./dev test tests/workflows/test_payload_defaults.py
"""

from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python
from temporalio import workflow

from tests.workflows import definitions

RECORDED = Path(__file__).with_name("payload_defaults.json")


def _types_of(fn: Any) -> list[Any]:
    return list(typing.get_type_hints(fn).values())


def _boundary_types() -> list[Any]:
    """The types of every activity's and workflow's inputs and results."""
    found: list[Any] = []
    for one in definitions.activities():
        found += [*(one.arg_types or []), one.ret_type]
    for cls in definitions.WORKFLOWS:
        defn = workflow._Definition.must_from_class(cls)
        found += _types_of(defn.run_fn)
        for handlers in (defn.signals, defn.updates, defn.queries):
            found += [t for h in handlers.values() if h.fn for t in _types_of(h.fn)]
    return found


def _models(hint: Any, seen: dict[str, type[BaseModel]]) -> None:
    if isinstance(hint, type) and issubclass(hint, BaseModel):
        name = f"{hint.__module__}.{hint.__qualname__}"
        if name in seen:
            return
        seen[name] = hint
        for field in hint.model_fields.values():
            _models(field.annotation, seen)
        return
    for arg in typing.get_args(hint):  # unions, lists, dicts
        _models(arg, seen)


def models() -> dict[str, type[BaseModel]]:
    """Every model the payloads carry, by module and name."""
    seen: dict[str, type[BaseModel]] = {}
    for hint in _boundary_types():
        _models(hint, seen)
    return seen


def defaults(seen: dict[str, type[BaseModel]]) -> dict[str, dict[str, Any]]:
    """Each model's fields that have a default, with it (as JSON)."""
    found = {}
    for name, model in sorted(seen.items()):
        fields = {}
        for field_name, field in model.model_fields.items():
            if field.default_factory is not None:
                value = field.default_factory()  # type: ignore[call-arg]
            elif field.default is not PydanticUndefined:
                value = field.default
            else:
                continue
            fields[field_name] = to_jsonable_python(value)
        found[name] = fields
    return found


def test_the_payloads_models_are_found() -> None:
    """The walk reaches the models a pass's payloads carry, nested ones included."""
    found = defaults(models())
    for model in ("dbi.steps.StepResult", "dbi.steps.Facts", "dbi.passes.LoadedPass"):
        assert model in found, sorted(found)
    assert found["dbi.steps.StepResult"]["held"] is False


def test_no_default_of_a_payload_model_changed() -> None:
    """Each recorded default is still the model's default (new ones may be added)."""
    seen = models()
    current = defaults(seen)
    if os.environ.get("DBI_RECORD_DEFAULTS"):
        RECORDED.write_text(json.dumps(current, indent=1, sort_keys=True) + "\n")
    recorded = json.loads(RECORDED.read_text())
    changed = [
        f"{model}.{field}: recorded {value!r}, now {current[model][field]!r}"
        for model, fields in recorded.items()
        if model in current
        for field, value in fields.items()
        if field in current[model] and current[model][field] != value
    ]
    dropped = [
        f"{model}.{field}: had the default {value!r}, now none (old payloads lack it)"
        for model, fields in recorded.items()
        if model in current
        for field, value in fields.items()
        if field not in current[model] and field in seen[model].model_fields
    ]
    unrecorded = [m for m in current if m not in recorded]
    assert not changed, "a payload's default changed (dbi/payloads.py): " + "; ".join(changed)
    assert not dropped, "; ".join(dropped)
    assert not unrecorded, f"record the defaults of {unrecorded} (this module's docstring)"
