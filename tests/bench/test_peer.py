"""The peer's work queue, with plain data: it behaves as client-go's does."""

from __future__ import annotations

import threading
import time

from bench.peer import WorkQueue

KEY = ("bench", "db000")


def _drain(queue: WorkQueue, seconds: float) -> list[tuple[str, str]]:
    """Take every key the queue hands out within ``seconds``, finishing each at once."""
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    taken = []
    while (key := queue.get(stop)) is not None:
        taken.append(key)
        queue.done(key)
    return taken


def test_requeues_of_one_key_do_not_pile_up() -> None:
    """Three passes in a row that each ask to be requeued bring one pass later, at the
    earliest time asked, not three."""
    queue = WorkQueue()
    for delay in (0.1, 0.25, 0.4):
        queue.add_after(KEY, delay)
    assert _drain(queue, 0.7) == [KEY]


def test_the_earlier_requeue_wins() -> None:
    """A key waiting 30 s that is asked for again in 0.1 s comes out after 0.1 s, once."""
    queue = WorkQueue()
    queue.add_after(KEY, 30)
    started = time.monotonic()
    queue.add_after(KEY, 0.1)
    queue.add_after(KEY, 20)
    assert _drain(queue, 0.5) == [KEY]
    assert time.monotonic() - started < 1


def test_a_key_added_while_processed_runs_again_after() -> None:
    """An event for a key being reconciled queues it once more, when the pass is done."""
    queue = WorkQueue()
    queue.add(KEY)
    stop = threading.Event()
    assert queue.get(stop) == KEY
    queue.add(KEY)
    queue.add(KEY)
    queue.done(KEY)
    assert _drain(queue, 0.2) == [KEY]
