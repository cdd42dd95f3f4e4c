"""Kubernetes list-then-watch, layered as kopf does it.

- ``forever`` only restarts: it runs ``list_then_watch`` again and again, backing off
  after errors, until asked to stop.
- ``list_then_watch`` lists (every object is reported as ``SYNC``, then the caller's
  ``on_listed`` is called: the list is whole), then watches from
  the list's resourceVersion with bookmarks, resuming after a timeout, and returns
  normally on 410 Gone so the next round relists: nothing between the list and the
  watch is lost.
- The handler is the caller's: it gets (event type, object as a dict).
- ``WatchState`` says whether a watch is live (listed, streaming) or failing, and
  since when: the watcher's readiness reads it.
- Every request has a client-side timeout too. A watch that stays silent past its
  read timeout (``silence_seconds``: an API server that stopped answering, a dropped
  route, a half-open TCP connection) is marked not live and resumed from its last
  resourceVersion, without a relist; the state is live again with the next event.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import watch
from urllib3.exceptions import ReadTimeoutError

log = logging.getLogger("dbi.streams")

Handler = Callable[[str, dict[str, Any]], None]
Listed = Callable[[], None]
WATCH_SECONDS = 240
MAX_BACKOFF_SECONDS = 30.0
# A list's client-side (connect, read) timeout.
LIST_TIMEOUT = (5.0, 60.0)


def silence_seconds(watch_seconds: int) -> float:
    """How long a watch may deliver nothing (no event, no bookmark, no end) before it
    is taken as stalled: twice its server-side timeout, at most 90 s (bookmarks come
    about every minute)."""
    return 2.0 * min(watch_seconds, 45)


@dataclass
class WatchState:
    """Whether a watch is live, and since when it is live or failing."""

    live: bool = False
    ever_listed: bool = False
    since: float = field(default_factory=time.monotonic)
    error: str = ""

    def listed(self) -> None:
        """Something came: a list, an event, a bookmark, a clean end."""
        self.ever_listed = True
        if not self.live:
            self.live, self.since, self.error = True, time.monotonic(), ""

    def failed(self, error: Exception) -> None:
        if self.live:
            self.since = time.monotonic()
        self.live, self.error = False, type(error).__name__

    def problem(self, kind: str, grace: float) -> str | None:
        """Why the watch is not live: it has not listed yet, or it has not been live for
        ``grace`` seconds (a hiccup shorter than that is no reason)."""
        if not self.ever_listed:
            why = f" ({self.error})" if self.error else ""
            return f"the {kind} watch has not listed yet{why}"
        down = time.monotonic() - self.since
        if self.live or down < grace:
            return None
        return f"the {kind} watch has not been live for {down:.0f}s ({self.error})"


@dataclass(frozen=True)
class Source:
    """One kind of object to watch: how to list it, and with which label selector;
    ``namespace`` is the one namespace ``list_fn`` lists (None: all)."""

    kind: str
    list_fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    label_selector: str | None = None
    namespace: str | None = None

    @property
    def name(self) -> str:
        """What logs and readiness call this watch: its kind, and its namespace if one."""
        return self.kind if self.namespace is None else f"{self.kind} in {self.namespace}"


# PartialObjectMetadata: the API server sends each object's metadata alone.
_METADATA = "application/json;as=PartialObjectMetadata{};g=meta.k8s.io;v=v1"


def metadata_only(list_fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a generated list function so that the API server sends each object's
    metadata alone, for lists and watches (as client-go's metadata informers ask):
    what a watch of Secrets must never receive is their data."""

    def list_metadata(*args: Any, watch: bool = False, **kwargs: Any) -> Any:
        """List or watch metadata only; ``kubernetes.watch`` reads the return type below
        and so hands each event's object on as a dict, resourceVersion kept.

        :return: object
        """
        if watch:
            return list_fn(*args, watch=True, _headers={"Accept": _METADATA.format("")}, **kwargs)
        # Parsed here, not by the client's model of the full list: the server sends an
        # empty PartialObjectMetadataList with ``items: null``. Errors raise as usual.
        response = list_fn(
            *args, _headers={"Accept": _METADATA.format("List")}, _preload_content=False, **kwargs
        )
        listed = json.loads(response.data)
        listed["items"] = listed.get("items") or []
        return listed

    return list_metadata


@dataclass(frozen=True)
class Listener:
    """Who hears a watch: ``handler`` gets each event; ``on_listed`` is called once a
    (re)list is whole; ``state`` is kept current."""

    handler: Handler
    on_listed: Listed | None = None
    state: WatchState = field(default_factory=WatchState)


def _as_dict(api: k8s.ApiClient, obj: Any) -> dict[str, Any]:
    return (
        obj if isinstance(obj, dict) else cast(dict[str, Any], api.sanitize_for_serialization(obj))
    )


def _list(api: k8s.ApiClient, source: Source, listener: Listener, kwargs: dict[str, Any]) -> str:
    """List and report each object (``SYNC``); return the list's resourceVersion."""
    listed = _as_dict(api, source.list_fn(*source.args, _request_timeout=LIST_TIMEOUT, **kwargs))
    listener.state.listed()
    for item in listed.get("items", []):
        listener.handler("SYNC", item)
    if listener.on_listed is not None:
        listener.on_listed()
    return str(listed["metadata"]["resourceVersion"])


def list_then_watch(
    api: k8s.ApiClient,
    source: Source,
    listener: Listener,
    stop: threading.Event,
    watch_seconds: int = WATCH_SECONDS,
) -> None:
    """List and report each object (``SYNC``), call ``on_listed`` (what the list did not
    report no longer exists), then stream changes from the list's resourceVersion (kept
    current by bookmarks) until 410 Gone or ``stop``.

    A watch that times out is resumed where it stopped, not relisted: relists happen
    only at start and after 410, when events may have been missed.
    """
    kwargs: dict[str, Any] = {}
    if source.label_selector:
        kwargs["label_selector"] = source.label_selector
    version = _list(api, source, listener, kwargs)
    while not stop.is_set():
        stream = watch.Watch()
        try:
            for event in stream.stream(
                source.list_fn,
                *source.args,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=watch_seconds,
                _request_timeout=(LIST_TIMEOUT[0], silence_seconds(watch_seconds)),
                **kwargs,
            ):
                listener.state.listed()
                if event["type"] != "BOOKMARK":
                    listener.handler(event["type"], _as_dict(api, event["object"]))
                if stop.is_set():
                    return
            listener.state.listed()  # the server ended the watch at its timeout: live
        except k8s.ApiException as e:
            if e.status == 410:
                log.info("watch of %s expired (410 Gone): relisting", source.name)
                return
            raise
        except ReadTimeoutError as e:
            log.warning("watch of %s went silent; resuming it", source.name)
            listener.state.failed(e)
        finally:
            stream.stop()
        version = stream.resource_version or version


def forever(
    api: k8s.ApiClient,
    source: Source,
    listener: Listener,
    stop: threading.Event,
    watch_seconds: int = WATCH_SECONDS,
    *,
    refused_seconds: float | None = None,
) -> None:
    """Run ``list_then_watch`` until ``stop``; back off exponentially after errors.

    ``refused_seconds``: a list the API server refuses (403: RBAC; 404: a kind not
    installed) is logged once and tried again every so many seconds, quietly, instead
    of backing off like any other error."""
    backoff = 0.5
    warned = False
    while not stop.is_set():
        try:
            list_then_watch(api, source, listener, stop, watch_seconds)
            backoff = 0.5
        except Exception as e:  # a network error, or the API server going away
            listener.state.failed(e)
            refused = isinstance(e, k8s.ApiException) and e.status in {403, 404}
            if refused and refused_seconds is not None:
                if not warned:
                    why = f"{getattr(e, 'status', '')} {getattr(e, 'reason', '')}"
                    log.warning(
                        "cannot list %s (%s); trying again every %.0fs",
                        source.name,
                        why,
                        refused_seconds,
                    )
                    warned = True
                stop.wait(refused_seconds)
                continue
            log.warning(
                "watch of %s failed (%s); retrying in %.1fs", source.name, type(e).__name__, backoff
            )
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
