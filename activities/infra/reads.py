"""How a pass reads the cluster: each object once a pass (``shared_reads``); in an
idle pass, from the worker's views (``activities.infra.views``) until a step would act
(``Stale``, ``confirm_fresh``); and what an idle pass may take again (``Spared``).
``sharing`` puts this under every call of the client (``activities.infra.kube.Kube``)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from activities.infra.views import Views


class Stale(BaseException):
    """Raised in an idle pass's block of reads (``shared_reads(idle=True)``) where a step
    would act after some read was answered from the worker's views: the pass runs again
    with every read fresh before anything is written (``confirm_fresh``).

    A BaseException, as ``GeneratorExit`` is: the steps' error handling (a step that
    raises ends the pass's one activity and names it) must let it through to the
    activity that runs the pass."""


@dataclass
class _Block:
    """The reads of one block: the server's answers by URL and form asked for (Accept),
    whether the views may answer (an idle pass), and whether one did."""

    answers: dict[tuple[str, str], Any] = field(default_factory=dict)
    idle: bool = False
    viewed: bool = False


# The block of reads this thread is in (``shared_reads``); None: every read goes to the
# server.
_SHARED: ContextVar[_Block | None] = ContextVar("dbi_shared_reads", default=None)


@contextmanager
def shared_reads(*, idle: bool = False) -> Iterator[None]:
    """Within this block, on this thread, a GET of a URL already read is answered as the
    server answered it the first time (an object, or its 404), until any other request
    (a write, of any kind, through this client) drops what was read.

    The steps of a pass read the same objects again and again (the VM, its VMI, the data
    claim, the Secrets); a pass's steps run in one activity (``run_pass``), and within
    it each object is read once, as a controller's reconcile reads from its cache. What
    a step wrote is read afresh. Nothing outlives the block but the answers the worker's
    views keep (``activities.infra.views``: never a Secret).

    ``idle``: a pass nothing woke; a GET of an object the worker views is answered from
    its views when they say it has not changed (``activities.infra.views``), and a step that
    would act then raises ``Stale`` instead (``confirm_fresh``).
    """
    token = _SHARED.set(_Block(idle=idle))
    try:
        yield
    finally:
        _SHARED.reset(token)


def viewed() -> bool:
    """Whether some read of this block was answered from the worker's views."""
    block = _SHARED.get()
    return block is not None and block.viewed


def rests_on_views() -> None:
    """Record that this block's decisions rest on something read from the views
    elsewhere (the pass's load): a step that would act raises ``Stale``."""
    block = _SHARED.get()
    if block is not None:
        block.viewed = True


def spares_reads() -> bool:
    """Whether this block is an idle pass's, which may leave out a read whose only news
    would be a change a missed wake brings (the credentials step's CA, taken from this
    process's recent read). When it is, the block's decisions
    rest on what was left out as on a read from the views: a step that would act raises
    ``Stale``, and the pass runs again with every read made."""
    block = _SHARED.get()
    if block is None or not block.idle:
        return False
    block.viewed = True
    return True


def confirm_fresh() -> None:
    """Raise ``Stale`` when this block's decisions rest on a read from the views: what a
    step does must rest on what the API server says now."""
    block = _SHARED.get()
    if block is not None and block.viewed:
        raise Stale


def sharing(call_api: Callable[..., Any], views: Views | None) -> Callable[..., Any]:
    """``ApiClient.call_api`` answering GETs from ``shared_reads`` when in one (and from
    ``views`` in an idle one)."""

    if getattr(call_api, "shares_reads", False):
        return call_api  # a second Kube over the same client

    def call(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        block = _SHARED.get()
        headers = (args[0] if args else kwargs.get("header_params")) or {}
        key = (url, str(headers.get("Accept", "")))
        if method != "GET":
            if block is not None:
                confirm_fresh()  # a write no step's act guarded: the same rule
                block.answers.clear()
            response = call_api(method, url, *args, **kwargs)
            if views is not None and method in {"PATCH", "PUT"}:
                response.read()
                views.written(*key, response)
            return response
        if block is None:
            return call_api(method, url, *args, **kwargs)
        if key in block.answers:
            return block.answers[key]
        viewed = views.answer(*key) if views is not None and block.idle else None
        if viewed is not None:
            block.viewed = True
            response = viewed
        else:
            response = call_api(method, url, *args, **kwargs)
            response.read()  # the body, kept for each caller to deserialize afresh
            if views is not None:
                views.remember(*key, response)
        block.answers[key] = response
        return response

    call.shares_reads = True  # type: ignore[attr-defined]
    return call


# How long an idle pass may take a cloud-init Secret from this worker's read (``Spared``).
SPARED_SECONDS = 3600.0


class Spared:
    """Reads no view vouches for that an idle pass may take again (the cloud-init
    Secrets: ``activities.infra.secrets.read_boot``), by key: each for ``seconds`` after it was
    read, at most ``size`` of them, the least recently used out first."""

    def __init__(
        self,
        size: int,
        seconds: float = SPARED_SECONDS,
        at_least: Callable[[], int] | None = None,
    ) -> None:
        self._size = size
        self._seconds = seconds
        self._at_least = at_least  # a larger size when there is (the instances served)
        self._reads: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._reads)

    def get(self, key: Hashable) -> Any | None:
        """The read kept under ``key``, while it is young enough; else None."""
        with self._lock:
            found = self._reads.get(key)
            if found is None:
                return None
            if time.monotonic() - found[0] >= self._seconds:
                del self._reads[key]
                return None
            self._reads.move_to_end(key)
            return found[1]

    def put(self, key: Hashable, read: Any) -> None:
        with self._lock:
            self._reads[key] = (time.monotonic(), read)
            self._reads.move_to_end(key)
            size = max(self._size, self._at_least()) if self._at_least else self._size
            while len(self._reads) > size:
                self._reads.popitem(last=False)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self._reads.pop(key, None)
