"""Start, probe and stop the local stack's processes.

Every process runs in its own process group, writes to a log file, and is stopped
with SIGTERM to the whole group, then SIGKILL. A process started for tests also
dies with its parent (``PR_SET_PDEATHSIG``), so an interrupted or killed test run
leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

_PR_SET_PDEATHSIG = 1

# How often a part is started again when a port picked free was taken before it bound it.
PORT_ATTEMPTS = 3


class StackError(RuntimeError):
    """A process of the local stack failed to start, or did not become ready."""


class PortTaken(StackError):
    """A process exited because another took a port of its own before it bound it."""


def _die_with_parent() -> None:
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def tail(path: Path, lines: int = 25) -> str:
    """Return the last lines of a log file, or a note that it is empty."""
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


class ManagedProcess:
    """Run one program of the local stack, with its output in a log file."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        *,
        log_path: Path,
        die_with_parent: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log_path = log_path
        self.die_with_parent = die_with_parent
        self._popen: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self._popen is None:
            raise StackError(f"{self.name} was not started")
        return self._popen.pid

    def start(self) -> None:
        """Start the program in a new process group, appending to its log file."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self._popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
                preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509
            )

    def wait_until(self, probe: Callable[[], bool], *, what: str, timeout: float) -> None:
        """Poll ``probe`` until it returns True; fail early if the process exits.

        Raises StackError naming ``what`` was awaited, with the end of the log.
        """
        deadline = time.monotonic() + timeout
        interval = 0.05
        while True:
            if self._popen is not None and (code := self._popen.poll()) is not None:
                raise StackError(
                    f"{self.name} exited with code {code} while waiting for {what}; "
                    f"end of {self.log_path}:\n{tail(self.log_path)}"
                )
            if probe():
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"{self.name}: {what} not reached within {timeout:.0f}s; "
                    f"end of {self.log_path}:\n{tail(self.log_path)}"
                )
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)

    def wait_listening(self, probe: Callable[[], bool], *, what: str, timeout: float) -> None:
        """As ``wait_until``, but raise PortTaken when the process exited because a port
        it would listen on was in use (its own, or one it picked itself)."""
        try:
            self.wait_until(probe, what=what, timeout=timeout)
        except StackError as error:
            exited = self._popen is not None and self._popen.poll() is not None
            said = [line for line in str(error).splitlines() if "address already in use" in line]
            if exited and said:
                raise PortTaken(f"{self.name}: a port was taken: {said[-1]}") from error
            raise

    def stop(self, *, timeout: float = 30.0) -> None:
        """Stop the whole process group: SIGTERM, then SIGKILL after ``timeout``."""
        if self._popen is None:
            return
        stop_group(self._popen.pid, timeout=timeout, wait=self._popen.wait)
        self._popen = None


def stop_group(pid: int, *, timeout: float, wait: Callable[[float], object] | None = None) -> None:
    """Send SIGTERM to a process group, and SIGKILL if it outlives ``timeout``.

    A group that is already gone is tolerated: stopping is idempotent.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _group_alive(pid) and time.monotonic() < deadline:
        if wait is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                wait(0.1)
        else:
            time.sleep(0.1)
    if _group_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    if wait is not None:
        wait(timeout)


def _group_alive(pgid: int) -> bool:
    # A zombie leader still counts here; callers that own the process reap it with
    # ``wait`` first, and a detached process is reaped by init.
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Listener(Protocol):
    """A part of the stack that listens on ports picked free before it starts."""

    process: ManagedProcess
    awaiting: str  # what ``ready`` waits for, as a timeout names it

    def argv(self) -> list[str]: ...

    def ready(self) -> bool:
        """Whether the part serves."""
        ...

    def repick(self) -> None:
        """Pick new free ports for the next start."""
        ...


def start_listening(part: Listener, *, timeout: float) -> None:
    """Start ``part`` and wait until it serves, on new ports when its own were taken.

    A port picked free (``tools.free_port``) can be taken before the process binds it,
    by another process's listener or an outgoing connection's ephemeral port; the
    process then exits at once. It is started again on ports picked afresh, up to
    PORT_ATTEMPTS times; a port the process picks itself (the dev server's HTTP API
    and metrics ports) it picks afresh at each start."""
    for attempt in range(1, PORT_ATTEMPTS + 1):
        part.process.argv = part.argv()
        part.process.start()
        try:
            part.process.wait_listening(part.ready, what=part.awaiting, timeout=timeout)
        except PortTaken:
            part.process.stop()
            if attempt == PORT_ATTEMPTS:
                raise
            part.repick()
        else:
            return
