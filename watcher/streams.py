"""Kubernetes list-then-watch, layered as kopf does it.

- ``forever`` only restarts: it runs ``list_then_watch`` again and again, backing off
  after errors, until asked to stop.
- ``list_then_watch`` lists (every object is reported as ``SYNC``, then the caller's
  ``on_listed`` is called: the list is whole), then watches from
  the list's resourceVersion with bookmarks, resuming after a timeout, and returns
  normally on 410 Gone so the next round relists: nothing between the list and the
  watch is lost.
- The handler is the caller's: it gets (event type, object as a dict).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from kubernetes import client as k8s
from kubernetes import watch

log = logging.getLogger("dbi.watcher")

Handler = Callable[[str, dict[str, Any]], None]
Listed = Callable[[], None]
WATCH_SECONDS = 240
MAX_BACKOFF_SECONDS = 30.0


@dataclass(frozen=True)
class Source:
    """One kind of object to watch: how to list it, and with which label selector."""

    kind: str
    list_fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    label_selector: str | None = None


def _as_dict(api: k8s.ApiClient, obj: Any) -> dict[str, Any]:
    return (
        obj if isinstance(obj, dict) else cast(dict[str, Any], api.sanitize_for_serialization(obj))
    )


def list_then_watch(
    api: k8s.ApiClient,
    source: Source,
    handler: Handler,
    stop: threading.Event,
    watch_seconds: int = WATCH_SECONDS,
    on_listed: Listed | None = None,
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
    listed = _as_dict(api, source.list_fn(*source.args, **kwargs))
    for item in listed.get("items", []):
        handler("SYNC", item)
    if on_listed is not None:
        on_listed()
    version = listed["metadata"]["resourceVersion"]
    while not stop.is_set():
        stream = watch.Watch()
        try:
            for event in stream.stream(
                source.list_fn,
                *source.args,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=watch_seconds,
                **kwargs,
            ):
                if event["type"] != "BOOKMARK":
                    handler(event["type"], _as_dict(api, event["object"]))
                if stop.is_set():
                    return
        except k8s.ApiException as e:
            if e.status == 410:
                log.info("watch of %s expired (410 Gone): relisting", source.kind)
                return
            raise
        finally:
            stream.stop()
        version = stream.resource_version or version


def forever(
    api: k8s.ApiClient,
    source: Source,
    handler: Handler,
    stop: threading.Event,
    watch_seconds: int = WATCH_SECONDS,
    on_listed: Listed | None = None,
) -> None:
    """Run ``list_then_watch`` until ``stop``; back off exponentially after errors."""
    backoff = 0.5
    while not stop.is_set():
        try:
            list_then_watch(api, source, handler, stop, watch_seconds, on_listed)
            backoff = 0.5
        except Exception as e:  # a network error, or the API server going away
            log.warning(
                "watch of %s failed (%s); retrying in %.1fs", source.kind, type(e).__name__, backoff
            )
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
