"""Ask a dbi process's probes (/livez, /readyz) as the kubelet would."""

from __future__ import annotations

import urllib.error
import urllib.request


def probe(port: int, path: str) -> tuple[int, str]:
    """The status and body of ``path`` on ``port``; (0, "") while nothing serves it."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as e:
        return int(e.code), e.read().decode()
    except (urllib.error.URLError, OSError):  # not serving yet
        return 0, ""
