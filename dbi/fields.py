"""What the spec's sections are made of: their base model (camelCase on the wire,
nothing unknown accepted), CEL rules for the CRD, durations, and the patterns and
bounds several sections share."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

# CEL cost estimation needs a bound on every string it looks at.
QUANTITY_MAX = 32
NAME_MAX = 63


def rules(*rules: tuple[str, str]) -> dict[str, Any]:
    """Return CEL validation rules (rule, message) in the CRD's extension field."""
    return {"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}


# A Secret's name: a DNS-1123 subdomain.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


# One field of a cron expression (minute, hour, day of month, month or day of week).
CRON_FIELD = r"[-0-9A-Za-z*/,?]+"

DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def duration_seconds(value: str) -> float:
    """Return the seconds of a Go-style duration such as ``5m`` or ``1h30m``."""
    if not DURATION.match(value):
        raise ValueError(f"{value!r} is not a duration, such as 30s, 5m or 1h")
    return sum(int(n) * _UNITS[unit] for n, unit in re.findall(r"([0-9]+)(ms|s|m|h)", value))


class Section(BaseModel):
    """A section of a spec: camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        use_enum_values=False,
    )
