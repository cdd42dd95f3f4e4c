"""The ``workflow.patched`` markers of DBInstanceWorkflow, and what each one chose.

A change to what a workflow does (commands, their order) runs behind a patch: a
workflow that began before the change replays, and runs on, as it did, and one that
began after takes the new path and records the marker. Each marker lives until no
running workflow can lack it: once every instance's workflow has continued as new (at
most ``history_limit`` events, ``RUN_EVENTS``: about two hours of passes at a
5-minute interval, some five days for a settled instance, whose workflow passes every
``RECHECK_NET``; a run begun with a limit of 300 holds twice that) with a worker that
knows the patch, ``workflow.deprecate_patch`` replaces ``patched``, and one release
later the old path goes. The recorded histories
in tests/workflows/histories/ that lack a marker are dropped at that point too.

- ``local-health-checks``: a health check's steps run as local activities;
- ``local-ready-passes``: so does every other pass of a Ready instance;
- ``local-passes``: so does every pass, but a forced resize's and the teardown's;
- ``retention-step``: the retention step joins the pipeline, after resize;
- ``admin-step``: the admin step joins the pipeline, after retention;
- ``tls-step``: the tls step joins the pipeline, between retention and admin;
- ``backup-steps``: the backup step joins the pipeline, last, and teardown_backup the
  teardown, first;
- ``repave-step``: the repave step joins the pipeline, after power;
- ``upgrade-step``: the upgrade step joins the pipeline, after power;
- ``held-steps-go-on``: a pass goes on past a step whose action is held (a maintenance
  window, resizePolicy Deferred), and waits at most healthCheckInterval after it;
- ``one-activity-passes``: a local pass runs its steps in one local activity
  (``runner.run_pass_in_one``): one marker for them all;
- ``wakes-before-load``: a wake is forgotten when the pass's load starts, not when its
  steps start: one that arrives between the two (while rotations are served, or during
  a long pass) brings another pass instead of being lost until the next interval;
- ``rotations-when-ready``: a rotation a dbi.dev/rotate-*requested-at annotation asks
  for waits until a pass found the instance Ready (one on a new instance was tried,
  and failed, before it ran), and is then carried out at once;
- ``status-with-steps``: the local activity that runs a pass's steps writes its status
  too (``run_pass``): one marker a pass for both, where a status write was a second;
- ``load-with-steps``: an idle pass that expects the instance as the last pass found it
  loads it and runs its pass in one local activity (``load_and_run_pass``): one marker;
- ``patches-at-start``: a run asks every patch above when it begins, before its first
  local activity (``at_start``), and reads the history's length only where a replay
  reads the same (``DBInstanceWorkflow._read_history``). The SDK (temporalio 1.35) may
  complete a workflow task with a local activity's marker before the code saw its
  result (a query rides on the task and the activity ends as the task completes): the
  code goes on in the next task, a replay in the same one, and a ``patched`` asked
  there, or the history's length, differs between the two (a marker in the next task
  reads as absent on replay). A run without this marker asks each patch where it needs
  it, as before (its replay is at that risk; tests/workflows/test_replay_under_queries.py).

- ``timer-history-reads``: a run reads its history's length at its start and when a
  wait ends by its timer, never when a wake ends it, and between two reads counts each
  pass as PASS_EVENTS events (``workflows.state.HistoryRead``). The SDK race above also
  hits a wait after a pass's only local activity (an idle pass's ``load_and_run_pass``)
  when a wake comes meanwhile: the run goes on in the next task, where the wake has
  come and the wait ends at once, and a replay in the first, where the same wait blocks
  until that wake, so "a wait that blocked" (what ``patches-at-start`` reads at) differs
  between the two, and with it the length read and the continue-as-new decision. A
  fired timer ends the wait in the same task on both.

- ``folded-patches``: a run asks this one patch at its start, and when it has it, has
  every patch above (``FOLDED``) without asking them: a new run records one marker
  where it recorded sixteen, and the SDK upserts the ``TemporalChangeVersion`` search
  attribute once instead of sixteen times (32 history events fewer a run; the dev
  server's visibility writes with them). A run begun before it asks the patches above
  as it did. A patch added after it is asked at the start beside it (``at_start``).

- ``fresh-load-with-steps``: a pass that reads afresh (one a wake or its step's hint
  brought: the VM running, a Secret edited, a Pending step's next look) and expects the
  instance as the last pass found it (no wake announced a newer generation) loads it
  and runs its pass in one local activity (``load_and_run_pass``), as an idle pass does
  from the views: one marker where it recorded two.
- ``folded-patches-2``: as ``folded-patches``, for that fold, the patch asked beside it
  and ``fresh-load-with-steps`` (``FOLDED_2``): a new run records one marker where it
  would record three, and the SDK's upsert of TemporalChangeVersion once.

To retire one: check that no running workflow began before it (every instance's run
has continued as new since, with a worker that knows it: ``temporal workflow list``
with ``StartTime`` after the release), replace ``patched`` by ``deprecate_patch``
for a release (and take it out of ASKED_AT_START), then remove the old path and the
recorded histories without the marker. The patches ``folded-patches`` stands for retire
together, once no running run lacks it: ``has`` then answers True for them unasked.

Workflow code: deterministic, no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from dbi import pipeline as steps
    from dbi.status import PassReport
    from dbi.steps import InstanceSnapshot

LOCAL_HEALTH_CHECKS = "local-health-checks"
LOCAL_READY_PASSES = "local-ready-passes"
LOCAL_PASSES = "local-passes"
RETENTION_STEP = "retention-step"
ADMIN_STEP = "admin-step"
TLS_STEP = "tls-step"
ROTATIONS_WHEN_READY = "rotations-when-ready"
BACKUP_STEPS = "backup-steps"
REPAVE_STEP = "repave-step"
HELD_STEPS_GO_ON = "held-steps-go-on"
UPGRADE_STEP = "upgrade-step"
ONE_ACTIVITY_PASSES = "one-activity-passes"
WAKES_BEFORE_LOAD = "wakes-before-load"
STATUS_WITH_STEPS = "status-with-steps"
LOAD_WITH_STEPS = "load-with-steps"
TIMER_HISTORY_READS = "timer-history-reads"
PATCHES_AT_START = "patches-at-start"
FOLDED_PATCHES = "folded-patches"
FRESH_LOAD_WITH_STEPS = "fresh-load-with-steps"
FOLDED_PATCHES_2 = "folded-patches-2"
# Every patch above, in the order a run that has PATCHES_AT_START asks them at its start.
ASKED_AT_START = (
    LOCAL_HEALTH_CHECKS,
    LOCAL_READY_PASSES,
    LOCAL_PASSES,
    RETENTION_STEP,
    ADMIN_STEP,
    TLS_STEP,
    ROTATIONS_WHEN_READY,
    BACKUP_STEPS,
    REPAVE_STEP,
    HELD_STEPS_GO_ON,
    UPGRADE_STEP,
    ONE_ACTIVITY_PASSES,
    WAKES_BEFORE_LOAD,
    STATUS_WITH_STEPS,
    LOAD_WITH_STEPS,
    TIMER_HISTORY_READS,
    FRESH_LOAD_WITH_STEPS,
)
# The patches FOLDED_PATCHES stands for: a run that has it has each of these. Written
# out, never derived from ASKED_AT_START: a patch added later is not among them (a run
# begun with the fold before it must replay without it).
FOLDED = frozenset(
    {
        PATCHES_AT_START,
        LOCAL_HEALTH_CHECKS,
        LOCAL_READY_PASSES,
        LOCAL_PASSES,
        RETENTION_STEP,
        ADMIN_STEP,
        TLS_STEP,
        ROTATIONS_WHEN_READY,
        BACKUP_STEPS,
        REPAVE_STEP,
        HELD_STEPS_GO_ON,
        UPGRADE_STEP,
        ONE_ACTIVITY_PASSES,
        WAKES_BEFORE_LOAD,
        STATUS_WITH_STEPS,
        LOAD_WITH_STEPS,
    }
)
# The patches FOLDED_PATCHES_2 stands for, written out as FOLDED is.
FOLDED_2 = FOLDED | {FOLDED_PATCHES, TIMER_HISTORY_READS, FRESH_LOAD_WITH_STEPS}
# Each fold and what it stands for, the newest first: a run has at most one.
FOLDS = ((FOLDED_PATCHES_2, FOLDED_2), (FOLDED_PATCHES, FOLDED))
# The steps that joined a pipeline under a patch, each with its patch.
PATCHED_STEPS = (
    (steps.RETENTION.name, RETENTION_STEP),
    (steps.TLS.name, TLS_STEP),
    (steps.ADMIN.name, ADMIN_STEP),
    (steps.BACKUP.name, BACKUP_STEPS),
    (steps.TEARDOWN_BACKUP.name, BACKUP_STEPS),
    (steps.REPAVE.name, REPAVE_STEP),
    (steps.UPGRADE.name, UPGRADE_STEP),
)


def at_start() -> bool:
    """Ask every patch now, at the start of the run, when the run has a fold (``FOLDS``,
    newest first) or PATCHES_AT_START: the SDK keeps each answer for the run, so the
    calls below return it wherever they are asked (a marker recorded later could read
    differently on replay). Whether it did. Call before the run's first activity."""
    for fold, stands_for in FOLDS:
        if workflow.patched(fold):
            for patch in ASKED_AT_START:
                if patch not in stands_for:
                    workflow.patched(patch)
            return True
    if not workflow.patched(PATCHES_AT_START):
        return False
    for patch in ASKED_AT_START:
        workflow.patched(patch)
    return True


def has(patch: str) -> bool:
    """Whether this run has ``patch``: a run that has a fold has the patches it stands
    for, and records no marker of their own; another run asks the patch."""
    folded = any(patch in stands_for and workflow.patched(fold) for fold, stands_for in FOLDS)
    return folded or workflow.patched(patch)


def pipeline(snapshot: InstanceSnapshot) -> tuple[steps.StepSpec, ...]:
    """The steps of the next pass: the teardown once the instance is being deleted, else
    the convergence, without the steps whose patch this workflow does not have."""
    chosen = steps.TEARDOWN if snapshot.deleting else steps.CONVERGE
    names = {s.name for s in chosen}
    absent = {step for step, patch in PATCHED_STEPS if step in names and not has(patch)}
    return tuple(s for s in chosen if s.name not in absent)


def past_held() -> bool:
    """Whether a pass goes on past a held step (asked only when one is held)."""
    return has(HELD_STEPS_GO_ON)


def local_pass(*, forced: bool, health_check: bool, last: PassReport | None) -> bool:
    """Whether the next pass runs its activities as local activities: every pass does
    but one that serves a forced resize (an operator's request that may restart the VM,
    shown step by step as activities). Each kind of pass became local under a patch of
    its own, so histories from before each replay as they ran."""
    if forced:
        return False
    if health_check:
        return has(LOCAL_HEALTH_CHECKS)
    if last is not None and last.converged and not last.deleting:
        return has(LOCAL_READY_PASSES)
    return has(LOCAL_PASSES)


def in_one_activity(*, local: bool) -> bool:
    """Whether a pass runs its steps in one local activity: every local pass does (the
    teardown's, a forced resize's and a restart's are not local)."""
    return local and has(ONE_ACTIVITY_PASSES)


def wakes_before_load() -> bool:
    """Whether a pass forgets the wakes before it when its load starts (else: when its
    steps start, and a wake between the two was lost)."""
    return has(WAKES_BEFORE_LOAD)


def status_with_steps() -> bool:
    """Whether the local activity that runs a pass's steps writes its status too (else a
    local activity of its own does)."""
    return has(STATUS_WITH_STEPS)


def load_with_steps() -> bool:
    """Whether an idle pass that expects the instance unchanged loads it and runs its
    steps in one local activity (else it loads first, in a local activity of its own)."""
    return has(LOAD_WITH_STEPS)


def fresh_load_with_steps() -> bool:
    """Whether a pass that reads afresh and expects the instance unchanged loads it and
    runs its steps in one local activity, as an idle pass does (else it loads first)."""
    return has(FRESH_LOAD_WITH_STEPS)


def timer_history_reads() -> bool:
    """Whether the run reads its history's length only where a timer ended a wait,
    counting each pass as PASS_EVENTS between two reads (else: where a wait blocked,
    and after UNREAD_PASSES passes without a read)."""
    return has(TIMER_HISTORY_READS)
