"""Fixtures of the activities' stack tests: the worker's views, and a Kube over them
whose requests are counted."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any

import pytest

from activities.infra.kube import Kube
from activities.infra.views import View, Views
from dbi import connect
from tests.polling import eventually


class Counted:
    """A Kube over a client of its own whose requests reaching the server are counted,
    by method and URL path."""

    def __init__(self, local_stack: Any, views: Views | None) -> None:
        api = connect.kubernetes(str(local_stack.kubeconfig))
        self.sent: list[tuple[str, str]] = []
        call_api = api.call_api

        def counting(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
            self.sent.append((method, url.split("?", maxsplit=1)[0].split("/", 3)[-1]))
            return call_api(method, url, *args, **kwargs)

        api.call_api = counting  # type: ignore[method-assign]
        self.kube = Kube(api, views)

    def asked(self, do: Any) -> tuple[Any, int]:
        """What ``do()`` returns, and how many requests it sent."""
        before = len(self.sent)
        value = do()
        return value, len(self.sent) - before


@pytest.fixture
def views(local_stack: Any, namespace: str, dbinstance_crd: str) -> Iterator[Views]:
    """The worker's views, in the test's namespace, listed and live."""
    found = Views.of(frozenset({namespace}), [], cached_workflows=4)
    found.start(connect.kubernetes(str(local_stack.kubeconfig), connections=len(found.views) + 1))
    try:
        for view in found.views:
            if view.kind.name in {"Service", "PersistentVolumeClaim", "DBInstance"}:
                eventually(partial(_live, view), what=f"the {view.label} view listed")
        yield found
    finally:
        found.stop()


def _live(view: View) -> bool:
    return view.live


@pytest.fixture
def counted(local_stack: Any, views: Views) -> Counted:
    return Counted(local_stack, views)
