"""Give each stand-in VM its own loopback address, a new one at each restart.

Linux routes all of 127.0.0.0/8 to the loopback interface, so every VM's PostgreSQL
can listen on port 5432 of an address of its own, as on a real network. Addresses
are kept in a JSON file by VM UID, so a restarted stand-in hands out the same ones; an
address another stack's VM already listens on is skipped. A VM that restarts gets a
new one (``renew``), as a KubeVirt VM's new virt-launcher pod gets a new IP.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

_PER_BLOCK = 250


def _address(index: int) -> str:
    return f"127.10.{index // _PER_BLOCK}.{index % _PER_BLOCK + 2}"


def _in_use(address: str) -> bool:
    """Tell whether something (another stack's VM, say) already listens on address:5432."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, 5432))
        except OSError:
            return True
        return False


class Addresses:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._by_uid: dict[str, str] = json.loads(path.read_text()) if path.exists() else {}

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

    def _free(self) -> str:
        taken = set(self._by_uid.values())
        index = 0
        while _address(index) in taken or _in_use(_address(index)):
            index += 1
        return _address(index)

    def release(self, uid: str) -> None:
        """Free the address of a VM that is gone."""
        with self._lock:
            if self._by_uid.pop(uid, None) is not None:
                self._save()

    def _save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self._by_uid, indent=1, sort_keys=True))
        tmp.replace(self.path)
