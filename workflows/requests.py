"""The update requests a DBInstance workflow serves: queued, answered or refused.

Workflow code (deterministic): rotations are served between passes, one at a time,
by their activity (``serve_rotations``); a forced resize is answered by the pass that
shows the size synced, or a Terminal outcome (``answer_resize_waiters``); a deletion
refuses whatever is queued (``refuse_all``). Every request is answered: an update
never fails the workflow, and a failure is the caller's answer.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from dbi import pipeline as steps
    from dbi.messages import ResizeResult, RotationRequest, RotationResult
    from dbi.models import Served
    from dbi.status import PassReport
    from dbi.steps import Outcome

ROTATION_TIMEOUT = timedelta(seconds=30)
# A rotation that keeps failing (the database unreachable, say) is answered after so
# many attempts, and the instance's passes go on.
ROTATION_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=10),
    maximum_attempts=3,
)
ROTATION_SUMMARY = {
    steps.ROTATE_CREDENTIALS: "rotate the app password (update)",
    steps.ROTATE_ADMIN_CREDENTIALS: "rotate dbi's admin password (update)",
}
# The rotations annotations ask for, by the status.served field that records them.
REQUESTED_ROTATIONS = {
    "rotate_requested_at": steps.ROTATE_CREDENTIALS,
    "rotate_admin_requested_at": steps.ROTATE_ADMIN_CREDENTIALS,
}
# A rotation's own refusals: their message is the answer the caller gets.
ROTATION_REFUSALS = frozenset({"NotRunning", "InstanceGone", "AdminNotReady"})


@dataclass
class Requests:
    """The requests not answered yet, and the answers not yet collected, by update id."""

    # Queued rotations: (update id, the activity that serves it).
    rotations: deque[tuple[str, str]] = field(default_factory=deque)
    resize_waiters: list[str] = field(default_factory=list)
    answers: dict[str, RotationResult | ResizeResult] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)

    def pending(self) -> bool:
        """Whether a request waits to be served."""
        return bool(self.rotations or self.resize_waiters)

    def count(self) -> int:
        return len(self.rotations) + len(self.resize_waiters)

    def queue_rotation(self, activity: str, request_id: str | None = None) -> str:
        """Queue a rotation served by ``activity``; return its id (by default the
        update's; an annotation's request names its own)."""
        request_id = request_id or _update_id()
        self.rotations.append((request_id, activity))
        return request_id

    def queue_requested_rotations(self, asked: Served) -> dict[str, tuple[str, str]]:
        """Queue the rotations annotations ask for; return {Served field: (value, id)}."""
        queued = {}
        for served_as, rotation in REQUESTED_ROTATIONS.items():
            if value := getattr(asked, served_as):
                request_id = annotation_request_id(f"{rotation}={value}")
                queued[served_as] = (value, self.queue_rotation(rotation, request_id))
        return queued

    def collect_requested_rotations(self, queued: dict[str, tuple[str, str]]) -> Served:
        """The values of the queued annotation rotations that were carried out (a refused
        or failed one is asked again by its annotation on the next pass); no caller waits
        for their answers, which are dropped."""
        done = {}
        for served_as, (value, request_id) in queued.items():
            self.refused.pop(request_id, None)
            if self.answers.pop(request_id, None) is not None:
                done[served_as] = value
        return Served.model_validate(done)

    def queue_resize(self) -> str:
        request_id = _update_id()
        self.resize_waiters.append(request_id)
        return request_id

    async def answer(self, request_id: str) -> Any:
        """Wait for the request's answer and return it, or raise its refusal (the caller
        gets it; the workflow goes on)."""
        await workflow.wait_condition(
            lambda: request_id in self.answers or request_id in self.refused
        )
        if request_id in self.refused:
            self._refuse(request_id)
        return self.answers.pop(request_id)

    def _refuse(self, request_id: str) -> NoReturn:
        raise ApplicationError(self.refused.pop(request_id), type="Refused", non_retryable=True)

    def refuse_all(self, why: str) -> None:
        for request_id in [*(r for r, _ in self.rotations), *self.resize_waiters]:
            self.refused[request_id] = why
        self.rotations.clear()
        self.resize_waiters.clear()

    async def serve_rotations(self, namespace: str, name: str, uid: str) -> int:
        """Carry out queued rotations one at a time, between passes; return how many ran.
        One that fails (after ROTATION_RETRY's attempts) is answered with why, and the
        passes go on."""
        ran = 0
        while self.rotations:
            ran += 1
            request_id, rotation = self.rotations[0]
            try:
                result = await workflow.execute_activity(
                    rotation,
                    RotationRequest(namespace=namespace, name=name, uid=uid, request_id=request_id),
                    result_type=RotationResult,
                    start_to_close_timeout=ROTATION_TIMEOUT,
                    retry_policy=ROTATION_RETRY,
                    summary=ROTATION_SUMMARY[rotation],
                )
            except ActivityError as e:
                workflow.logger.warning("rotation %s failed", request_id)
                self.rotations.popleft()
                self.refused[request_id] = _rotation_failure(e)
                continue
            self.rotations.popleft()
            self.answers[request_id] = result
        return ran

    def answer_resize_waiters(self, report: PassReport) -> None:
        """Answer forced resizes once a pass shows the size synced, or a Terminal outcome."""
        if not self.resize_waiters:
            return
        resize = next((r for r in report.results if r.step == steps.RESIZE.name), None)
        blocking = report.blocking
        if resize is not None and resize.outcome is Outcome.SATISFIED:
            answer = ResizeResult(resized=True, reason=resize.reason, message=resize.message)
        elif blocking is not None and blocking.outcome is Outcome.TERMINAL:
            answer = ResizeResult(resized=False, reason=blocking.reason, message=blocking.message)
        else:
            return
        for request_id in self.resize_waiters:
            self.answers[request_id] = answer
        self.resize_waiters.clear()


def annotation_request_id(value: str) -> str:
    """The rotation request id of an annotation's request (the rotation and the value):
    the same value is the same request, carried out once however often it is tried."""
    return "annotation-" + hashlib.sha256(value.encode()).hexdigest()[:16]


def _rotation_failure(error: ActivityError) -> str:
    """The answer to a rotation that failed: the activity's own refusal, or a generic
    sentence (the error's detail is in the activity's failure in history, never here)."""
    cause = error.cause
    if isinstance(cause, ApplicationError) and cause.type in ROTATION_REFUSALS:
        return cause.message
    return (
        f"the rotation failed after {ROTATION_RETRY.maximum_attempts} attempts; the "
        "credentials Secret keeps a password that works (see the workflow's history)"
    )


def _update_id() -> str:
    info = workflow.current_update_info()
    if info is None:
        raise RuntimeError("an update handler runs outside an update")
    return info.id
