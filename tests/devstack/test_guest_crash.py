"""The stand-in's power loss (``Guest.crash``): every process of the guest is gone when
it returns, as on a VM that is off, so the guest boots again at once. A backend still
exiting holds PostgreSQL's shared memory, and a boot then stops at "pre-existing shared
memory block is still in use"; on a loaded machine that took the walarchive crash test
60 s to report as a guest that never came back."""

from __future__ import annotations

import contextlib
from pathlib import Path

import psycopg

from activities.infra import postgres
from devstack.vmstandin.kubevirt import Size
from tests.guests import Booted, wait_ready


def _tree(pid: int) -> list[int]:
    """``pid`` and every process under it, from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue  # gone since it was listed
        children.setdefault(parent, []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_a_crash_returns_once_every_process_of_the_guest_is_gone(booted: Booted) -> None:
    guest = booted.guest
    assert guest is not None
    sessions = contextlib.ExitStack()
    for _ in range(8):
        sessions.enter_context(postgres.connect(booted.server, password=booted.password))
    server = guest.pid
    assert server is not None
    tree = _tree(server)
    assert len(tree) > 8  # the postmaster, its workers and a backend per session

    guest.crash()

    assert [pid for pid in tree if _running(pid)] == []
    with contextlib.suppress(psycopg.Error):
        sessions.close()  # each to a server that is gone
    guest.forget()
    guest.boot(Size(1, 1, 1, 1, 512 << 20, 512 << 20))
    wait_ready(guest, "the guest's PostgreSQL back after the crash")
