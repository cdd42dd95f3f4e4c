"""Watch-fed views: what lets an idle pass read nothing from the API server.

An instance that nothing woke is checked every ``healthCheckInterval``; such a pass
(``StepInput.idle``) reads the same objects as the last one, and they have not changed:
had they, the watcher would have woken the workflow, and the pass would not be idle.
So the worker keeps, as controller-runtime's client does, watches of its own:

- ``View``: one kind's objects (in one namespace, or all), as their resourceVersions
  and labels only (metadata-only lists and watches: ``dbi.streams``), kept current;
- ``Views``: every view, and the answers the API server last gave to GETs of the
  objects they cover (the response, by URL and the form asked for), least recently
  used first out.

In an idle pass's block of reads (``activities.infra.reads.shared_reads(idle=True)``) a GET is
answered from the last answer when its view is live and has the object at the very
resourceVersion that answer carried (a list: every object its selector matches, each
at the version the answer had). Anything else goes to the server: an object the view
does not have (a 404, one without the instance label), a view not listed yet or whose
watch is down, a kind the worker may not list (RBAC: a warning once, then quiet
retries). Secrets are never viewed (the worker may not list them; docs/deploy.md):
their reads go to the server, but for one: an idle pass takes an instance's cloud-init
Secret from this worker's read of it in the last hour (``Spared``), as the next section
says.

The views lag the API server by a watch event's latency; a pass a change woke does not
use them (the watcher is another process, whose event may come before the worker's),
and an idle pass that would act is run again with every read fresh before anything is
written (``activities.infra.reads.Stale``).

``Spared``: the backup step's describes of Temporal Schedules are kept in one too
(``activities.infra.schedules``). The cloud-init Secret (boot data: the admin password's
verifier, the server certificate and its key) changes only by a step's write (this
worker's drops what it kept; another worker's was made to be right) or by a hand, which
wakes the instance (the watcher watches Secrets' metadata). So an idle pass takes this
worker's last read of it, when one is under an hour old (what a wake the watcher never
sent could hide, it hides no longer); a step that would act on it runs the pass again
with every read made (``activities.infra.reads.spares_reads``). The passwords' Secrets, the
admin credential and the app's, are read from the server on every pass.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from kubernetes import client as k8s

from activities.infra.reads import Spared
from dbi import kinds, names
from dbi.kinds import DBINSTANCES, VIEWED, Kind
from dbi.streams import Listener, WatchState, forever

# How long a view the API server refused (403: RBAC; 404: a kind not installed) waits
# before it lists again; the first refusal is logged, the rest are quiet.
REFUSED_SECONDS = 300.0
# Answers kept per instance (or per cached workflow, DBI_CACHED_WORKFLOWS, when more):
# an idle pass or re-check reads about 10 viewed objects. By the instances the views
# hold, not the cache: a worker whose cache is smaller than its fleet still re-checks
# every instance (activities.worker.rechecks), and an answer not kept is a request.
ANSWERS_PER_WORKFLOW = 16

Key = tuple[str, str]  # an object's name and resourceVersion


# Viewed in the images' namespaces only (DBI_IMAGES).
IMAGES = Kind(
    "VirtualMachineImage", "apis/harvesterhci.io/v1beta1/virtualmachineimages", labelled=False
)


@dataclass(frozen=True)
class Target:
    """What a request's URL names: a kind's collection path, a namespace (None: every
    namespace, or a cluster-scoped kind), an object's name (None: the collection), and
    the query."""

    path: str
    namespace: str | None
    name: str | None
    query: tuple[tuple[str, str], ...]


def target(url: str) -> Target | None:
    """Read a request URL (``…/api/v1/namespaces/a/services/b``); None for anything but
    an object or a collection (a subresource, say)."""
    parts = urlsplit(url)
    segments = [s for s in parts.path.split("/") if s]
    for i, segment in enumerate(segments):
        if segment in {"api", "apis"}:
            width = 2 if segment == "api" else 3
            root, rest = segments[i : i + width], segments[i + width :]
            break
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if len(root) != width or not 1 <= len(rest) <= 2:
        return None
    name = rest[1] if len(rest) == 2 else None
    query = tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return Target("/".join([*root, rest[0]]), namespace, name, query)


def _selector(query: tuple[tuple[str, str], ...]) -> dict[str, str] | None:
    """The equality label selector a list asks with, when that is all it asks; None for
    any other list (a field selector, a limit, a set-based selector)."""
    if [k for k, _ in query] != ["labelSelector"]:
        return None
    wanted = {}
    for term in query[0][1].split(","):
        key, eq, value = term.partition("=")
        if not eq or value.startswith("=") or key.endswith("!"):
            return None
        wanted[key.strip()] = value.strip()
    return wanted


Entry = tuple[str, dict[str, str]]  # an object's resourceVersion and labels


@dataclass
class View:
    """One kind's objects in one namespace (or all): each one's resourceVersion and
    labels, by namespace and name, kept current by a metadata-only list and watch."""

    kind: Kind
    namespace: str | None = None
    state: WatchState = field(default_factory=WatchState)
    objects: dict[str, dict[str, Entry]] = field(default_factory=dict)
    _listing: dict[str, dict[str, Entry]] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.state.live

    def covers(self, namespace: str | None) -> bool:
        return self.namespace is None or namespace == self.namespace

    def version(self, namespace: str | None, name: str) -> str | None:
        found = self.objects.get(namespace or "", {}).get(name)
        return None if found is None else found[0]

    def matching(self, namespace: str | None, wanted: dict[str, str]) -> frozenset[Key] | None:
        """The (name, resourceVersion) of each object in ``namespace`` whose labels have
        ``wanted``; None when the view may not hold them all (its own selector is not
        among ``wanted``)."""
        if self.kind.selector is not None and self.kind.selector not in wanted:
            return None
        return frozenset(
            (name, rv)
            for name, (rv, labels) in list(self.objects.get(namespace or "", {}).items())
            if all(labels.get(k) == v for k, v in wanted.items())
        )

    # The listener's side.

    def seen(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace") or "", meta.get("name") or ""
        entry = (str(meta.get("resourceVersion") or ""), dict(meta.get("labels") or {}))
        if event == "SYNC":
            self._listing.setdefault(namespace, {})[name] = entry
        elif event == "DELETED":
            self.objects.get(namespace, {}).pop(name, None)
        else:
            self.objects.setdefault(namespace, {})[name] = entry

    def listed(self) -> None:
        """A (re)list is whole: what it did not report no longer exists."""
        self.objects, self._listing = self._listing, {}

    @property
    def label(self) -> str:
        return self.kind.name if self.namespace is None else f"{self.kind.name} in {self.namespace}"


@dataclass(frozen=True)
class _Answer:
    """A 200 the API server gave: the resourceVersion it carried (a list: each object's
    name and resourceVersion), and the response, read."""

    version: str | frozenset[Key]
    response: Any


class Views:
    """Every view, the server's last answers to GETs of what they cover, and the reads
    an idle pass may take again though no view vouches for them (``spared``): at least
    ``answers`` and ``spared`` of them, and as many as the DBInstances the views hold
    call for (``ANSWERS_PER_WORKFLOW`` answers and one spared read each)."""

    def __init__(self, views: Iterable[View], answers: int, spared: int = 0) -> None:
        self._views: dict[str, list[View]] = {}
        for view in views:
            self._views.setdefault(view.kind.path, []).append(view)
        self._size = answers
        self._answers: OrderedDict[tuple[str, str], _Answer] = OrderedDict()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.spared = Spared(spared, at_least=self.served)

    @classmethod
    def of(
        cls,
        namespaces: frozenset[str] | None,
        image_namespaces: Iterable[str],
        cached_workflows: int,
    ) -> Views:
        """The worker's views: each kind cluster-wide, or in each of ``namespaces``
        (DBI_WATCH_NAMESPACES); the images in their namespaces."""
        views = []
        for kind in VIEWED:
            if kind.namespaced and namespaces is not None:
                views += [View(kind, ns) for ns in sorted(namespaces)]
            else:
                views.append(View(kind))
        views += [View(IMAGES, ns) for ns in sorted(set(image_namespaces))]
        return cls(views, answers=cached_workflows * ANSWERS_PER_WORKFLOW, spared=cached_workflows)

    def instances(self) -> list[tuple[str, str]] | None:
        """The (namespace, name) of every DBInstance the views hold; None until each
        DBInstance view has listed them."""
        held = [v for v in self.views if v.kind is DBINSTANCES]
        if not held or not all(v.live for v in held):
            return None
        found = {(ns, name) for v in held for ns, named in v.objects.items() for name in named}
        return sorted(found)

    def served(self) -> int:
        """How many DBInstances the views hold (listed or not yet)."""
        held = self._views.get(DBINSTANCES.path, [])
        return sum(len(named) for v in held for named in list(v.objects.values()))

    @property
    def views(self) -> list[View]:
        return [v for found in self._views.values() for v in found]

    @property
    def kept(self) -> int:
        """How many of the server's answers are kept."""
        with self._lock:
            return len(self._answers)

    # The reads' side (``activities.infra.kube``).

    def _view(self, found: Target) -> View | None:
        for view in self._views.get(found.path, []):
            if view.covers(found.namespace) and view.live:
                return view
        return None

    def answer(self, url: str, accept: str) -> Any | None:
        """The server's last answer to this GET, when the view says it still holds; None:
        ask the server."""
        found = target(url)
        view = None if found is None or self._stop.is_set() else self._view(found)
        if found is None or view is None or not _judged(found, view.kind):
            return None
        with self._lock:
            answer = self._answers.get((url, accept))
            if answer is not None:
                self._answers.move_to_end((url, accept))
        if answer is None:
            return None
        if found.name is not None:
            current: str | frozenset[Key] | None = view.version(found.namespace, found.name)
        else:
            wanted = _selector(found.query)
            assert wanted is not None  # _judged
            current = view.matching(found.namespace, wanted)
        return answer.response if current is not None and current == answer.version else None

    def remember(self, url: str, accept: str, response: Any) -> None:
        """Keep the server's answer to a GET of what a view covers (a 200 only), unless
        no view could ever vouch for it (``_answerable``)."""
        found = target(url)
        if found is None or found.path not in self._views or response.status != 200:
            return
        try:
            body = json.loads(response.data)
        except ValueError:
            return
        if not _answerable(found, self._views[found.path][0].kind, body):
            return
        if found.name is not None:
            version: str | frozenset[Key] = str((body.get("metadata") or {}).get("resourceVersion"))
        else:
            version = frozenset(
                (str(item["metadata"]["name"]), str(item["metadata"].get("resourceVersion")))
                for item in body.get("items") or []
            )
        size = max(self._size, ANSWERS_PER_WORKFLOW * self.served())
        with self._lock:
            self._answers[(url, accept)] = _Answer(version, response)
            self._answers.move_to_end((url, accept))
            while len(self._answers) > size:
                self._answers.popitem(last=False)

    def written(self, url: str, accept: str, response: Any) -> None:
        """Keep what a write of an object answered (a PUT or PATCH of it or of its
        status: the object as the write left it) as the server's answer to its GET.
        The views vouch for it once their watch has that version, so the pass after a
        pass's own write (its status, say) reads the object from them, not the server."""
        parts = urlsplit(url)
        path = parts.path.removesuffix("/status")
        self.remember(urlunsplit(parts._replace(path=path, query="")), accept, response)

    # Running.

    def start(self, api: k8s.ApiClient) -> None:
        """List and watch every view, each on a thread of its own, over ``api`` (a client
        of their own: a watch holds its connection)."""
        for view in self.views:
            threading.Thread(
                target=self._keep, args=(api, view), name=f"view {view.label}", daemon=True
            ).start()

    def stop(self) -> None:
        self._stop.set()

    def _keep(self, api: k8s.ApiClient, view: View) -> None:
        listener = Listener(view.seen, view.listed, view.state)
        source = kinds.source(api, view.kind, view.namespace, metadata=True)
        forever(api, source, listener, self._stop, refused_seconds=REFUSED_SECONDS)


def _judged(found: Target, kind: Kind) -> bool:
    """Whether a view can tell if the answer to this GET still holds: an object asked
    with no query; a list in one namespace (of a namespaced kind: the views index by
    namespace) by an equality selector."""
    if found.name is not None:
        return not found.query
    if kind.namespaced and found.namespace is None:
        return False
    return _selector(found.query) is not None


def _answerable(found: Target, kind: Kind, body: dict[str, Any]) -> bool:
    """Whether a view could ever answer this GET again (``Views.answer``): one it can
    judge, of an object it holds (with the instance label, for a kind viewed by it)."""
    if not _judged(found, kind):
        return False
    labels = (body.get("metadata") or {}).get("labels") or {}
    return found.name is None or not kind.labelled or names.INSTANCE_LABEL in labels
