"""Every activity the worker hosts, bound to one Context."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from activities.access import Access
from activities.admin import Admin
from activities.context import Context
from activities.credentials import Credentials
from activities.health import Health
from activities.instance import LoadInstance
from activities.monitoring import Monitoring
from activities.power import Power
from activities.preflight import Preflight
from activities.resize import Resize
from activities.retention import Retention
from activities.rotation import RotateAdminCredentials, RotateCredentials
from activities.status import WriteStatus
from activities.teardown import TeardownFinalizer, TeardownMonitoring, TeardownVM
from activities.vm import VM

STEPS = (
    Preflight,
    Credentials,
    VM,
    Power,
    Resize,
    Retention,
    Admin,
    Health,
    Access,
    Monitoring,
    TeardownMonitoring,
    TeardownVM,
    TeardownFinalizer,
    LoadInstance,
    WriteStatus,
    RotateCredentials,
    RotateAdminCredentials,
)


def all_activities(ctx: Context) -> list[Callable[..., Any]]:
    """Return the activity functions of every step, bound to ``ctx``."""
    return [step(ctx).run for step in STEPS]
