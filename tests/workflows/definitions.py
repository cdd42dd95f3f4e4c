"""The real activities and workflows, for their names and types (nothing runs here)."""

from __future__ import annotations

from typing import cast

from temporalio import activity
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.worker import Replayer

from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.worker.registry import all_activities
from dbi.config import Config
from dbi.payloads import DATA_CONVERTER
from workflows.backup import DBBackupWorkflow
from workflows.dbinstance import DBInstanceWorkflow
from workflows.objects import DBDatabaseWorkflow, DBRoleWorkflow
from workflows.upgrade import DBUpgradeWorkflow
from workflows.worker import workflow_runner

WORKFLOWS = (
    DBInstanceWorkflow,
    DBBackupWorkflow,
    DBUpgradeWorkflow,
    DBDatabaseWorkflow,
    DBRoleWorkflow,
)


def activities() -> list[activity._Definition]:
    """Every activity the worker registers, as the SDK defines it."""
    context = Context(kube=cast(Kube, None), config=Config())
    return [activity._Definition.must_from_callable(fn) for fn in all_activities(context)]


def replayer(*, sandboxed: bool) -> Replayer:
    """A replayer of dbi's workflows as the worker runs them (its data converter and
    tracing interceptor), in the SDK's sandbox when ``sandboxed`` (the worker runs
    workflow code outside it: ``workflow_runner``)."""
    return Replayer(
        workflows=WORKFLOWS,
        data_converter=DATA_CONVERTER,
        interceptors=[TracingInterceptor()],
        workflow_runner=workflow_runner(sandboxed=sandboxed),
    )
