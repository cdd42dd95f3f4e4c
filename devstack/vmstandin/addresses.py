"""Give each stand-in VM its own loopback address, a new one at each restart.

Linux routes all of 127.0.0.0/8 to the loopback interface, so every VM's PostgreSQL
can listen on port 5432 of an address of its own, as on a real network. Each stand-in
hands out addresses from a /16 of its own (``127.<range>.0.0``, a range from 10 to 31;
Services' ClusterIPs are above, ``devstack.controlplane.service_cidr``): it holds a lock
on its range for as long as it runs, so two stacks on one machine (parallel test
sessions) never give two VMs one address, also while neither listens yet. Addresses
are kept in a JSON file by VM UID and the range beside it, so a restarted stand-in
hands out the same ones; an address something else listens on is skipped. A VM that
restarts gets a new one (``renew``), as a KubeVirt VM's new virt-launcher pod gets a
new IP.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import tempfile
import threading
from pathlib import Path
from typing import IO

from devstack.process import StackError

_PER_BLOCK = 250
RANGES = range(10, 32)
LOCKS = Path(tempfile.gettempdir()) / "dbi-standin-ranges"


def _in_use(address: str) -> bool:
    """Tell whether something (another stack's VM, say) already listens on address:5432."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, 5432))
        except OSError:
            return True
        return False


def _claim(preferred: int | None) -> tuple[int, IO[str]]:
    """Lock a range no other running stand-in holds, the preferred one when it is free.
    The lock goes when the process ends, however it ends."""
    LOCKS.mkdir(mode=0o1777, exist_ok=True)
    order = sorted(RANGES, key=lambda r: r != preferred)  # the preferred one first
    for candidate in order:
        lock = (LOCKS / str(candidate)).open("a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        return candidate, lock
    raise StackError(
        f"every VM address range (127.{RANGES[0]} to 127.{RANGES[-1]}) is held by a "
        f"running stand-in (locks in {LOCKS}); stop a stack with `dbi dev down`"
    )


class Addresses:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_uid: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}
        saved = path.parent / "address-range"
        preferred = int(saved.read_text()) if saved.exists() else None
        self.range, self._held = _claim(preferred)
        tmp = path.parent / "address-range.tmp"
        tmp.write_text(f"{self.range}\n")
        os.replace(tmp, saved)

    def close(self) -> None:
        """Let another stand-in have this range."""
        self._held.close()

    def of(self, uid: str) -> str:
        """Return the VM's address, allocating the lowest free one on first use."""
        with self._lock:
            if uid not in self._by_uid:
                self._by_uid[uid] = self._free()
                self._save()
            return self._by_uid[uid]

    def renew(self, uid: str) -> str:
        """Give the VM a new address, never its last one (a restarted VM's pod gets a
        new IP on KubeVirt): clients must reach it through its Service."""
        with self._lock:
            self._by_uid[uid] = self._free()  # its current one is still taken
            self._save()
            return self._by_uid[uid]

    def _address(self, index: int) -> str:
        return f"127.{self.range}.{index // _PER_BLOCK}.{index % _PER_BLOCK + 2}"

    def _free(self) -> str:
        taken = set(self._by_uid.values())
        index = 0
        while self._address(index) in taken or _in_use(self._address(index)):
            index += 1
        return self._address(index)

    def release(self, uid: str) -> None:
        """Free the address of a VM that is gone."""
        with self._lock:
            if self._by_uid.pop(uid, None) is not None:
                self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._by_uid, indent=1, sort_keys=True))
        tmp.replace(self.path)
