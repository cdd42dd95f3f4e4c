"""The real activities and workflows, for their names and types (nothing runs here)."""

from __future__ import annotations

from typing import cast

from temporalio import activity

from activities.kube import Kube
from activities.registry import all_activities
from activities.step import Context
from dbi.config import Config
from workflows.backup import DBBackupWorkflow
from workflows.dbinstance import DBInstanceWorkflow
from workflows.upgrade import DBUpgradeWorkflow

WORKFLOWS = (DBInstanceWorkflow, DBBackupWorkflow, DBUpgradeWorkflow)


def activities() -> list[activity._Definition]:
    """Every activity the worker registers, as the SDK defines it."""
    context = Context(kube=cast(Kube, None), config=Config())
    return [activity._Definition.must_from_callable(fn) for fn in all_activities(context)]
