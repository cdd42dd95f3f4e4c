"""One table of the kinds dbi lists (``dbi.kinds``): the watcher watches its watched
kinds, the worker's views keep its viewed ones, and a Secret is only ever watched as
metadata."""

from __future__ import annotations

from kubernetes import client as k8s

from dbi import names
from dbi.kinds import KINDS, VIEWED, WATCHED, source
from watcher.watcher import sources


def test_the_watcher_watches_the_tables_watched_kinds_in_each_namespace() -> None:
    api = k8s.ApiClient()
    assert [s.kind for s in sources(api)] == [k.name for k in WATCHED]
    scoped = sources(api, frozenset({"team-b", "team-a"}))
    assert [(s.namespace, s.kind) for s in scoped] == [
        (ns, k.name) for ns in ("team-a", "team-b") for k in WATCHED
    ]
    children = {s.kind for s in sources(api) if s.label_selector == names.INSTANCE_LABEL}
    assert children == {k.name for k in WATCHED} - {"DBInstance", "DBDatabase", "DBRole"}


def test_a_secret_is_watched_as_metadata_alone_and_never_viewed() -> None:
    (secret,) = [k for k in KINDS if k.name == "Secret"]
    assert secret.watched and secret.metadata and secret not in VIEWED
    (watched,) = [s for s in sources(k8s.ApiClient()) if s.kind == "Secret"]
    assert watched.list_fn.__name__ == "list_metadata"  # dbi.streams.metadata_only


def test_every_kind_has_a_list_function_for_each_scope() -> None:
    api = k8s.ApiClient()
    for kind in KINDS:
        for namespace in ("team-a", None) if kind.namespaced else (None,):
            found = source(api, kind, namespace, metadata=True)
            assert (found.kind, found.namespace) == (kind.name, namespace)
            assert found.label_selector == kind.selector
            assert callable(found.list_fn)
