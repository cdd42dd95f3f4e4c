"""The worker: hosts DBInstanceWorkflow, DBDatabaseWorkflow, DBRoleWorkflow, DBBackupWorkflow,
DBUpgradeWorkflow, DBRestoreTestWorkflow, the install's minutely ones and their
activities on the ``dbi`` task queue.

Run it with ``python -m workflows.worker`` (or ``dbi worker``). It connects to
``TEMPORAL_ADDRESS`` (default 127.0.0.1:7233) in ``TEMPORAL_NAMESPACE`` (default
``default``) on the task queue ``DBI_TASK_QUEUE`` (default ``dbi``), and to
Kubernetes with ``KUBECONFIG`` (or in-cluster credentials),
with the pydantic data converter and OpenTelemetry tracing, so every workflow and
activity is a span. ``DBI_METRICS_PORT``, ``DBI_LOG_FORMAT`` and the ``OTEL_*``
variables are read by ``dbi.telemetry``.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.runtime import Runtime
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from activities.infra.context import Context
from activities.infra.kube import Kube
from activities.infra.minutely import ensure_minutely
from activities.infra.reads import Spared
from activities.infra.schedules import Schedules
from activities.infra.views import Views
from activities.worker import registry
from activities.worker.rechecks import CONCURRENCY, Rechecks
from activities.worker.telemetry import StepTelemetry
from dbi import connect, environment, names, pipeline, telemetry
from dbi.config import Config
from dbi.health import Health, connect_temporal
from dbi.messages import Wake
from workflows.backup import DBBackupWorkflow
from workflows.dbinstance import DBInstanceWorkflow
from workflows.objects import DBDatabaseWorkflow, DBRoleWorkflow
from workflows.reaper import DBBackupReaperWorkflow
from workflows.restoretest import DBRestoreTestWorkflow
from workflows.upgrade import DBUpgradeWorkflow
from workflows.walarchiver import DBWalArchiverWorkflow

log = logging.getLogger("dbi.worker")


SHUTDOWN_DEFAULT = environment.SHUTDOWN_SECONDS.default or "45"
CACHED_DEFAULT = int(environment.CACHED_WORKFLOWS.default or "1000")
STICKY_DEFAULT = timedelta(seconds=float(environment.STICKY_SECONDS.default or "60"))
LONG_DEFAULT = int(environment.LONG_ACTIVITIES.default or "2")
# Another worker that polled for workflow tasks this recently takes a hand-off's passes
# (a poll waits for a task up to a minute before the next begins).
OTHERS_POLLED_WITHIN = timedelta(minutes=2)


@dataclass(frozen=True)
class Tuning:
    """How a worker holds its work: running activities get ``graceful_shutdown`` to
    finish on shutdown before they are cancelled (Temporal retries a cancelled one on
    another worker); up to ``cached_workflows`` workflows stay in memory between their
    tasks; a workflow task waits ``sticky`` for the worker that holds its workflow
    before any worker may take it (replaying the history); workflow code runs in the
    SDK's sandbox only when ``sandboxed`` (``workflow_runner``)."""

    graceful_shutdown: timedelta = timedelta(0)
    cached_workflows: int = CACHED_DEFAULT
    sandboxed: bool = False
    sticky: timedelta = STICKY_DEFAULT
    long_activities: int = LONG_DEFAULT


class Workers:
    """The process's two Temporal workers, run together (``async with``): the workflows
    and the steps on the task queue, and the long activities (``dbi.pipeline.LONG``:
    backups, the phases of an upgrade) on its long task queue, with slots and threads
    of their own (``DBI_LONG_ACTIVITIES``), so that long work never holds a step's."""

    def __init__(self, main: Worker, long: Worker, executor: ThreadPoolExecutor | None) -> None:
        self.main, self.long, self._executor = main, long, executor

    async def __aenter__(self) -> Workers:
        await self.main.__aenter__()
        try:
            await self.long.__aenter__()
        except BaseException:
            await self.main.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        try:
            await self.long.__aexit__(None, None, None)
        finally:
            await self.main.__aexit__(None, None, None)
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)


def _name(fn: Callable[..., Any]) -> str:
    # The SDK's own reading of an activity's name (it has no public accessor).
    return str(activity._Definition.must_from_callable(fn).name)


def build_worker(
    client: Client,
    activities: Sequence[Callable[..., Any]],
    *,
    task_queue: str = names.TASK_QUEUE,
    executor: ThreadPoolExecutor | None = None,
    tuning: Tuning = Tuning(),
) -> Workers:
    """Return the workers for the workflows and the given activities: the long ones
    (``dbi.pipeline.LONG``) on ``names.long_task_queue(task_queue)``.

    The step activities are synchronous (the Kubernetes client and psycopg block), so
    they run in ``executor``, and the long ones in a pool of their own; stub activities
    in tests are async and need neither.
    """
    long = [fn for fn in activities if _name(fn) in pipeline.LONG]
    main = Worker(
        client,
        workflow_runner=workflow_runner(sandboxed=tuning.sandboxed),
        task_queue=task_queue,
        workflows=[
            DBInstanceWorkflow,
            DBDatabaseWorkflow,
            DBRoleWorkflow,
            DBBackupWorkflow,
            DBUpgradeWorkflow,
            DBBackupReaperWorkflow,
            DBWalArchiverWorkflow,
            DBRestoreTestWorkflow,
        ],
        activities=[fn for fn in activities if fn not in long],
        activity_executor=executor,
        max_concurrent_activities=ACTIVITY_THREADS,
        interceptors=[StepTelemetry()],
        graceful_shutdown_timeout=tuning.graceful_shutdown,
        max_cached_workflows=tuning.cached_workflows,
        sticky_queue_schedule_to_start_timeout=tuning.sticky,
    )
    threads = tuning.long_activities
    long_executor = (
        ThreadPoolExecutor(max_workers=threads, thread_name_prefix="long")
        if executor is not None
        else None
    )
    return Workers(
        main,
        Worker(
            client,
            task_queue=names.long_task_queue(task_queue),
            activities=long or [_idle],
            activity_executor=long_executor,
            max_concurrent_activities=threads,
            interceptors=[StepTelemetry()],
            graceful_shutdown_timeout=tuning.graceful_shutdown,
        ),
        long_executor,
    )


@activity.defn(name="dbi_no_long_activities")
async def _idle() -> None:
    """What a worker given no long activity (a test's stubs) hosts on the long queue: a
    Temporal worker must host something."""


ACTIVITY_THREADS = 32


def workflow_runner(*, sandboxed: bool) -> WorkflowRunner:
    """How the worker runs workflow code: in the SDK's sandbox, or not.

    The sandbox re-imports a workflow's own module for each run and checks each call
    into a restricted module (the clock, randomness, I/O) at every activation. Only
    workflows/dbinstance.py, backup.py and upgrade.py are checked: everything they call
    (workflows.runner, .state, .requests, dbi.*) is passed through, so unchecked
    already. The checks cost 31 % of the worker's CPU when converging and 12 % idle
    (1,000 stubbed instances, docs/benchmarks.md), so the worker runs its
    workflows outside it; the workflow tests and the replay of recorded histories run
    them inside, where a clock read or a random number in those three modules fails
    them (tests/workflows/test_workflow_runner.py).
    """
    return SandboxedWorkflowRunner() if sandboxed else UnsandboxedWorkflowRunner()


# What a worker hosts, from its Context: every real activity, or (the benchmark's
# ``bench.stubworker``) the converge steps stubbed.
Hosted = Callable[[Context], list[Callable[..., Any]]]


def step_activities(
    kubeconfig: str | None = None,
    *,
    schedules: Schedules | None = None,
    hosted: Hosted | None = None,
    views: Views | None = None,
    rechecks: Rechecks | None = None,
) -> list[Callable[..., Any]]:
    """Return every step activity (or what ``hosted`` makes of the Context), talking to
    the cluster of ``kubeconfig`` (or $KUBECONFIG), answering idle passes' reads from
    ``views`` when given, for backup schedules, to Temporal through ``schedules``, and
    handing the instances idle passes settle to ``rechecks``."""
    ctx = Context(
        kube=Kube(
            connect.kubernetes(
                kubeconfig,
                connections=ACTIVITY_THREADS,
                request_timeout=connect.REQUEST_TIMEOUT_SECONDS,
            ),
            views,
        ),
        config=Config.from_env(),
        schedules=schedules,
        rechecks=rechecks,
    )
    return (hosted or registry.all_activities)(ctx)


async def wake(client: Client, workflow_id: str, signal: Wake) -> None:
    """Send the DBInstance workflow ``workflow_id`` a wake (``activities.worker.rechecks``)."""
    await client.get_workflow_handle(workflow_id).signal(names.WAKE, signal)


async def others_poll(client: Client, task_queue: str) -> bool:
    """Whether a worker other than this client's polled ``task_queue`` for workflow
    tasks in the last ``OTHERS_POLLED_WITHIN``: one that would run the passes a hand-off
    asks for (``Rechecks.hand_off``). With none, those passes would wait for the next
    worker to start, together, where its start round spreads them."""
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=timedelta(seconds=3),  # a stopping worker does not wait for long
    )
    since = datetime.now(UTC) - OTHERS_POLLED_WITHIN
    return any(
        p.identity != client.identity and p.last_access_time.ToDatetime(UTC) >= since
        for p in described.pollers
    )


async def hand_off(client: Client, task_queue: str, rechecks: Rechecks) -> None:
    """Hand this stopping worker's settled instances on to the workers still polling
    (``Rechecks.hand_off``), if any; else leave them to the next worker's start round."""
    if not len(rechecks):
        return
    try:
        others = await others_poll(client, task_queue)
    except Exception as e:  # their own pass still comes, RECHECK_NET after the last
        log.warning("could not ask who else polls %s: %s", task_queue, e)
        return
    if not others:
        log.info(
            "no other worker polls %s: the next to start settles its %d instances",
            task_queue,
            len(rechecks),
        )
        return
    await rechecks.hand_off()


def workflow_ids(views: Views) -> list[str] | None:
    """The workflow id of every DBInstance ``views`` hold; None until they listed them."""
    found = views.instances()
    return None if found is None else [names.workflow_id(ns, name) for ns, name in found]


def start_views(cached_workflows: int, kubeconfig: str | None = None) -> Views:
    """Start the worker's views (``activities.infra.views``): cluster-wide, or in the
    namespaces of DBI_WATCH_NAMESPACES, and the images' namespaces, over a client of
    their own (each watch holds a connection)."""
    images = Config.from_env().image_namespaces
    views = Views.of(environment.WATCH_NAMESPACES.items(), images, cached_workflows)
    views.start(connect.kubernetes(kubeconfig, connections=len(views.views) + 1))
    return views


async def main(hosted: Hosted = registry.all_activities) -> None:
    health = Health.expecting("temporal")
    async with telemetry.process_telemetry("dbi-worker", health) as runtime:
        await serve(runtime, health, hosted)


async def serve(runtime: Runtime, health: Health, hosted: Hosted = registry.all_activities) -> None:
    client, probing = await connect_temporal(runtime, health)
    address = client.service_client.config.target_host
    executor = ThreadPoolExecutor(max_workers=ACTIVITY_THREADS, thread_name_prefix="activity")
    task_queue = environment.TASK_QUEUE.value()
    grace = environment.SHUTDOWN_SECONDS.seconds() or float(SHUTDOWN_DEFAULT)
    cached = environment.CACHED_WORKFLOWS.integer(low=1) or CACHED_DEFAULT
    sticky = environment.STICKY_SECONDS.seconds() or STICKY_DEFAULT.total_seconds()
    long = environment.LONG_ACTIVITIES.integer(low=1, high=64) or LONG_DEFAULT
    views = start_views(cached)
    # An idle pass takes the backup step's describe of its schedule from the last hour.
    spared = Spared(cached, at_least=views.served)
    schedules = Schedules(client, asyncio.get_running_loop(), task_queue, spared)
    await ensure_minutely(client, task_queue)
    rechecks = Rechecks(partial(wake, client))
    health.vitals["rechecks"] = rechecks.stuck  # settled instances wait on them
    worker = build_worker(
        client,
        step_activities(schedules=schedules, hosted=hosted, views=views, rechecks=rechecks),
        task_queue=task_queue,
        executor=executor,
        tuning=Tuning(
            timedelta(seconds=grace),
            cached,
            sticky=timedelta(seconds=sticky),
            long_activities=long,
        ),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker polling task queue %s at %s", task_queue, address)
    checking = ThreadPoolExecutor(max_workers=CONCURRENCY, thread_name_prefix="recheck")
    rechecking = asyncio.create_task(rechecks.run(checking))
    starting = asyncio.create_task(rechecks.start(partial(workflow_ids, views)))
    async with worker:
        await stop.wait()
        log.info("worker shutting down")
        rechecking.cancel()
        starting.cancel()
    await hand_off(client, task_queue, rechecks)  # it polls no more: passes go elsewhere
    checking.shutdown(wait=True, cancel_futures=True)
    views.stop()
    probing.cancel()


if __name__ == "__main__":
    asyncio.run(main())
